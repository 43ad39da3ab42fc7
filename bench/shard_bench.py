"""A hot quota on a 3-primary Redis Cluster: one key vs K = 3, 6, 12 shards, in one run.

Usage: python bench/shard_bench.py [--steps 4000] [--workers 1] [--view-ttl 0.05]
                                   [--buffer B [--idle 0.05]] [--instructions]

Starts a real 3-primary Cluster (tests/helpers/redis_topology.py), then for the single-key
quota (``RedisLeaseStore``) and each sharded quota (``ShardedLeaseStore``, limit 48) runs
the same admission workload twice: callers from 1,000 tenants, evenly, then skewed (16
tenants, tenant 0 asking for 40 % of the admissions, the rest spread evenly); each step
admits one more caller (p = 0.55) or releases a random holder, so the quota drifts up to
its limit and runs there with rejections; the rebalancer runs every 50 steps (in process:
deterministic). ``--workers W`` spreads the steps over W stores on the same quota, each
with its own view of the shards (it sees its own replies and releases only), as W
processes would: the single worker's view is exact, theirs goes stale. A step takes about
one round trip (< 1 ms), so the default 50 ms ``view_ttl`` spans some 50 releases here,
where a real quota whose work takes seconds sees one or two in 50 ms: ``--view-ttl
0.002`` keeps that ratio for a multi-worker run. ``--buffer B`` adds, in the same run, the
sharded quotas with a ``LeaseBuffer`` of B slots per worker (``--idle``: its idle bound,
50 ms by default, again some 50 steps here); every lease a buffer hands out is kept
alive by its own heartbeat, as a real holder's is.

Printed per variant:
- busiest primary's share of the admission scripts (EVALSHA calls in each server's
  ``INFO commandstats``; one key: 100 %), for even and for skewed callers,
- round trips per admission attempt (acquire scripts / attempts; a spill to a second
  shard is a second round trip),
- stranded capacity: rejections while some shard had a free slot, read exactly (every
  shard's live holders and limit) right after each rejection, or — with buffers — while
  another worker's buffer held an unused slot (stranded by design), as a share of
  rejections,
- with buffers: the admissions served from a buffer (no round trip) and the renewals per
  admission (heartbeats of the leases the buffers keep alive; not in the round trips),
  and K = 6 once more with half the limit in use by work (a quota with headroom), without
  and with the buffer,
- with ``--instructions``: client instructions per uncontended acquire + release under
  callgrind (the difference of a 40- and a 240-pair run, so start-up cancels out).
Targets: busiest primary ≤ 40 % at K = 6; ≤ 1.3× the single-key cost per admission;
stranded ≤ 5 % of rejections.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import callgrind  # noqa: E402 - bench/callgrind.py, beside this script
from prometheus_client import CollectorRegistry  # noqa: E402
from redis.backoff import NoBackoff  # noqa: E402
from redis.cluster import RedisCluster  # noqa: E402
from redis.retry import Retry  # noqa: E402

from corevo_obs.leases.buffer import LeaseBuffer  # noqa: E402
from corevo_obs.leases.redis_store import RedisLeaseStore  # noqa: E402
from corevo_obs.leases.sharded import ShardedLeaseStore  # noqa: E402
from tests.helpers.redis_topology import RedisCluster3  # noqa: E402

LIMIT, TENANTS, HOT, ADMIT, EVEN = 48, 16, 0.4, 0.55, 1000
KINDS = (0, 1, 3, 6, 12)
BUFFERED = (3, 6, 12)  # the sharded quotas run again with buffers (--buffer)
REBALANCE = 50  # steps between rebalance rounds (20 was measured worse: 1.43× at K = 6)
OPTS: dict[str, Any] = {"timeout": 30.0, "heartbeat_interval": 5.0, "margin": 1.0}
VIEW_TTL = [0.05]  # the stores' view_ttl (--view-ttl)
IDLE = [0.05]  # the buffers' idle bound (--idle)


def client(port: int) -> RedisCluster:
    return RedisCluster(host="127.0.0.1", port=port, socket_timeout=1.0,
                        socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))


def make(kind: int, cl: RedisCluster, name: str, fresh: bool = True) -> Any:
    """0: the single-key quota; K >= 1: a sharded one (``fresh``: declared new and
    rebalanced once, so it is open)."""
    if kind == 0:
        single = RedisLeaseStore(name, cl, limit=LIMIT, registry=CollectorRegistry(), **OPTS)
        if fresh:
            single.declare_fresh()
        return single
    store = ShardedLeaseStore(name, cl, limit=LIMIT, shards=kind, registry=CollectorRegistry(),
                              rebalance_every=1e9, view_ttl=VIEW_TTL[0], **OPTS)
    if fresh:
        store.declare_fresh()
        store.rebalance()
    return store


def room(store: Any) -> bool:
    """Exactly now: does some shard have a live holder fewer than its limit?"""
    cl = store.client
    for s in store.shards:
        held = cl.zcount(s.key, time.time() - store.timeout, "+inf")
        if held < int(cl.get(s.limit_key) or 0):
            return True
    return False


def _total(registries: list[CollectorRegistry], name: str, **labels: str) -> float:
    """A counter summed over the fleet's registries and every other label."""
    out = 0.0
    for reg in registries:
        for metric in reg.collect():
            out += sum(s.value for s in metric.samples if s.name == name
                       and all(s.labels.get(k) == v for k, v in labels.items()))
    return out


def workload(topo: RedisCluster3, kind: int, steps: int, hot: float,
             tenants: int = TENANTS, seed: int = 7, workers: int = 1,
             buffer: int = 0, cap: int = 0) -> dict[str, float]:
    cl = client(topo.ports[0])
    name = f"bench{kind}-{hot}-{workers}-{buffer}-{cap}"
    store = make(kind, cl, name)
    # more workers: more stores on the same quota, each with its own view of the shards
    # (it sees only its own replies and releases); the first one rebalances
    fleet = [store] + [make(kind, cl, name, fresh=False) for _ in range(workers - 1)]
    registries = [one.registry for one in fleet]
    front: list[Any] = [LeaseBuffer(one, size=buffer, idle=IDLE[0]) for one in fleet] \
        if buffer else fleet
    rng = random.Random(seed)
    held: list[tuple[int, Any]] = []
    attempts = rejections = stranded = in_buffers = 0
    topo.reset_stats()
    for step in range(steps):
        # ``cap``: work in progress kept at or below it (a quota with headroom)
        if not held or (rng.random() < ADMIT and not (cap and len(held) >= cap)):
            tenant = 0 if rng.random() < hot else rng.randrange(1, tenants)
            attempts += 1
            w = rng.randrange(workers)
            lease = front[w].acquire() if kind == 0 else front[w].acquire(key=f"tenant-{tenant}")
            if lease is None:
                rejections += 1
                # with buffers, a slot unused in another worker's buffer strands too
                if kind and room(store):
                    stranded += 1
                elif kind and buffer and any(b.buffered for j, b in enumerate(front)
                                             if j != w):
                    stranded += 1
                    in_buffers += 1
            else:
                held.append((w, lease))
        else:
            w, lease = held.pop(rng.randrange(len(held)))
            if buffer:
                front[w].release(lease)
            else:
                lease.release()
        if kind and step % REBALANCE == REBALANCE - 1:
            store.rebalance()
    stats = topo.commandstats()
    renewals = _total(registries, "corevo_lease_heartbeat_total")
    hits = _total(registries, "corevo_lease_buffer_total", outcome="hit")
    for w, lease in held:
        front[w].release(lease) if buffer else lease.release()
    for one in front:
        one.close()
    if buffer:
        for one in fleet:
            one.close()
    evalsha = {p: s.get("evalsha", 0) for p, s in stats.items()}
    # the rebalancer's own scripts: (K limit reads + 1 lease) per round, and its writes;
    # renewals (the buffers' keep-alives) are scripts too, reported apart
    rounds = steps // REBALANCE if kind else 0
    scripts = sum(evalsha.values()) - rounds * (kind + 1) - renewals
    return {"busiest": max(evalsha.values()) / sum(evalsha.values()),
            "round_trips": scripts / attempts, "rejections": rejections,
            "stranded": stranded / rejections if rejections else 0.0, "attempts": attempts,
            "in_buffers": in_buffers / rejections if rejections else 0.0,
            "hits": hits / attempts, "renewals": renewals / attempts,
            **{f"evalsha:{p}": float(v) for p, v in evalsha.items()}}


def inner(port: int, kind: int, pairs: int) -> None:
    """Under callgrind: ``pairs`` uncontended acquire + release pairs (one caller key)."""
    store = make(kind, client(port), f"cg{kind}")
    for _ in range(pairs):
        lease = store.acquire() if kind == 0 else store.acquire(key="tenant-1")
        assert lease is not None
        lease.release()
    store.close()


def instructions(port: int, kind: int) -> float:
    script = str(Path(__file__).resolve())
    few, _ = callgrind.instructions([script, "--inner", str(port), str(kind), "40"])
    many, _ = callgrind.instructions([script, "--inner", str(port), str(kind), "240"])
    return (many - few) / 200


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--instructions", action="store_true")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--view-ttl", type=float, default=VIEW_TTL[0])
    ap.add_argument("--buffer", type=int, default=0,
                    help="also run the sharded quotas with a LeaseBuffer of B per worker")
    ap.add_argument("--idle", type=float, default=IDLE[0], help="the buffers' idle bound (s)")
    ap.add_argument("--inner", nargs=3, type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        inner(*args.inner)
        return 0
    if args.steps < 100:
        print("shard_bench: --steps must be >= 100", file=sys.stderr)
        return 2
    if not 1 <= args.workers <= 32:
        print("shard_bench: --workers must be in 1..32", file=sys.stderr)
        return 2
    if not 0 <= args.view_ttl <= 10:
        print("shard_bench: --view-ttl must be in 0..10 seconds", file=sys.stderr)
        return 2
    if not 0 <= args.buffer <= 48:
        print("shard_bench: --buffer must be in 0..48 (the limit)", file=sys.stderr)
        return 2
    if not 0 < args.idle < OPTS["timeout"]:
        print(f"shard_bench: --idle must be in (0, {OPTS['timeout']:g}) seconds",
              file=sys.stderr)
        return 2
    VIEW_TTL[0], IDLE[0] = args.view_ttl, args.idle
    if args.instructions and not callgrind.available():
        print("shard_bench: --instructions needs valgrind (apt-get install valgrind)",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp, RedisCluster3(Path(tmp)) as topo:
        w = args.workers
        even = {k: workload(topo, k, args.steps, 1 / EVEN, EVEN, workers=w) for k in KINDS}
        rows = {k: workload(topo, k, args.steps, HOT, workers=w) for k in KINDS}
        b = args.buffer
        buffered = {k: (workload(topo, k, args.steps, 1 / EVEN, EVEN, workers=w, buffer=b),
                        workload(topo, k, args.steps, HOT, workers=w, buffer=b))
                    for k in BUFFERED} if b else {}
        # below the limit: half of it in use by work, so rejections are rare
        half = {buf: workload(topo, 6, args.steps, HOT, workers=w, buffer=buf, cap=LIMIT // 2)
                for buf in (0, b)} if b else {}
        cost = {k: instructions(topo.ports[0], k) for k in rows} if args.instructions else {}
    base_rt = rows[0]["round_trips"]
    print(f"limit {LIMIT}, {args.steps} steps, {args.workers} worker(s), view_ttl "
          f"{args.view_ttl * 1000:g} ms, 3 primaries, "
          f"rebalance every {REBALANCE} steps; even callers ({EVEN} tenants) and skewed "
          f"({TENANTS} tenants, tenant 0: {HOT:.0%})")
    print("| quota | busiest primary, even | busiest primary, skewed | round trips / "
          "admission, skewed | vs one key | stranded / rejections, skewed | rejections |"
          + (" client instr. / pair | × one key | est. per admission × |" if cost else ""))
    print("|---|---|---|---|---|---|---|" + ("---|---|---|" if cost else ""))
    for k, r in rows.items():
        line = (f"| {'one key' if k == 0 else f'K = {k}'} | {even[k]['busiest']:.1%} | "
                f"{r['busiest']:.1%} | {r['round_trips']:.3f} | "
                f"{r['round_trips'] / base_rt:.2f}× | {r['stranded']:.1%} | "
                f"{r['rejections']:.0f} of {r['attempts']:.0f} |")
        if cost:
            ratio = cost[k] / cost[0]
            line += (f" {cost[k]:,.0f} | {ratio:.3f}× | "
                     f"{ratio * r['round_trips'] / base_rt:.2f}× |")
        print(line)
    if buffered:
        print(f"\nwith a LeaseBuffer of {args.buffer} per worker (idle bound "
              f"{args.idle * 1000:g} ms), same run; stranded counts rejections while some "
              "shard or another worker's buffer had room")
        print("| quota | busiest primary, even | busiest primary, skewed | round trips / "
              "admission, skewed | vs one key | stranded / rejections, skewed (only in a buffer) "
              "| rejections | served from a buffer | renewals / admission |")
        print("|---|---|---|---|---|---|---|---|---|")
        for k, (ev, r) in buffered.items():
            for label, e, x in ((f"K = {k}", even[k], rows[k]),
                                (f"K = {k} + buffer {args.buffer}", ev, r)):
                print(f"| {label} | {e['busiest']:.1%} | {x['busiest']:.1%} | "
                      f"{x['round_trips']:.3f} | {x['round_trips'] / base_rt:.2f}× | "
                      f"{x['stranded']:.1%} ({x['in_buffers']:.1%}) | "
                      f"{x['rejections']:.0f} of {x['attempts']:.0f} | {x['hits']:.1%} | "
                      f"{x['renewals']:.3f} |")
        print(f"\nbelow the limit (work holds at most {LIMIT // 2} of {LIMIT} slots), K = 6, "
              "skewed callers, same run")
        print("| K = 6 | busiest primary | round trips / admission | vs one key "
              "| stranded / rejections (only in a buffer) | rejections | served from a "
              "buffer |")
        print("|---|---|---|---|---|---|---|")
        for buf, x in half.items():
            print(f"| {'no buffer' if buf == 0 else f'buffer {buf}'} | {x['busiest']:.1%} | "
                  f"{x['round_trips']:.3f} | {x['round_trips'] / base_rt:.2f}× | "
                  f"{x['stranded']:.1%} ({x['in_buffers']:.1%}) | {x['rejections']:.0f} of "
                  f"{x['attempts']:.0f} | {x['hits']:.1%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
