"""``corevo-obs leases audit``: who holds a quota, how stale, and whose worker is gone;
``corevo-obs leases provision``: create a quota's restart-fence marker at deploy time.

Reads without changing anything (no reaping; SQLite is opened with a ``mode=ro`` URI, so
no table is created and the journal mode is left alone), so it is safe against
production. Exit 0, or 1 with ``--fail-on-orphans`` when a holder's process is provably
gone; 2 with one line for bad input or an unreadable store.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from typing import Any

from ..core.errors import ConfigError

SOURCE = "corevo-obs leases audit"


def register(sub: Any) -> None:
    p = sub.add_parser("leases", help="inspect named leases")
    cmds = p.add_subparsers(dest="leases_command", metavar="COMMAND", required=True)
    a = cmds.add_parser("audit", help="report holders, oldest heartbeat and orphans of a quota")
    a.add_argument("quota")
    where = a.add_mutually_exclusive_group(required=True)
    where.add_argument("--redis", metavar="URL", help="Redis URL of the lease store")
    where.add_argument("--sqlite", metavar="PATH", help="SQLite file of the lease store")
    a.add_argument("--key", help="Redis key (default corevo:lease:{QUOTA})")
    a.add_argument("--timeout", default="30",
                   help="the quota's lease timeout in seconds, to tell expired holders "
                   "(default 30)")
    a.add_argument("--limit", default=None, help="the quota's limit, for the report")
    a.add_argument("--json", action="store_true", help="print one JSON object")
    a.add_argument("--fail-on-orphans", action="store_true",
                   help="exit 1 when a holder's process is gone")
    a.set_defaults(func=run)
    v = cmds.add_parser("provision", help="create a quota's restart-fence marker at deploy "
                        "time, so its first request is served (idempotent)")
    v.add_argument("quota")
    where = v.add_mutually_exclusive_group(required=True)
    where.add_argument("--redis", metavar="URL", help="Redis URL of the lease store")
    where.add_argument("--sqlite", metavar="PATH", help="SQLite file of the lease store")
    v.add_argument("--key", help="Redis key (default corevo:lease:{QUOTA})")
    v.add_argument("--shards", type=int, default=None, metavar="K",
                   help="a sharded quota of K shards (Redis): its shards and rebalancer")
    v.set_defaults(func=provision)


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"--timeout must be a finite number of seconds > 0, got {text!r}",
                          source=SOURCE)
    return value


def _limit(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(f"--limit must be an integer >= 1, got {text!r}", source=SOURCE)
    return value


def _options(timeout: float, limit: int | None) -> dict[str, Any]:
    """Store options for a read: the waits scale with the timeout, so any valid timeout
    passes the store's check (an audit never holds a lease)."""
    from prometheus_client import CollectorRegistry

    from ..observer import Observer

    return {"limit": limit or 1, "timeout": timeout, "heartbeat_interval": timeout / 4,
            "worker": "cli", "observer": Observer(), "registry": CollectorRegistry()}


def run(args: argparse.Namespace) -> int:
    from ..leases import LeaseAuditor, SqliteLeaseStore

    timeout, limit = _timeout(args.timeout), _limit(args.limit)
    opts = _options(timeout, limit)
    wait = min(5.0, timeout / 4)
    if not args.redis:
        if args.key:
            raise ConfigError("--key applies to --redis only", source=SOURCE)
        if not os.path.isfile(args.sqlite):  # an audit never creates a store
            raise ConfigError(f"{args.sqlite}: no such SQLite file", source=SOURCE)
    store: Any = None
    try:
        if args.redis:
            from ..leases.redis_store import RedisLeaseStore

            store = RedisLeaseStore(args.quota, args.redis, key=args.key,
                                    socket_timeout=min(2.0, wait * 0.7),
                                    connect_timeout=min(1.0, wait * 0.3), **opts)
        else:
            store = SqliteLeaseStore(args.quota, args.sqlite, readonly=True,
                                     busy_timeout=wait, **opts)
        report = LeaseAuditor(store).audit()
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - one clear line, not a traceback
        raise ConfigError(f"cannot read the lease store: {exc}", source=SOURCE) from None
    finally:
        if store is not None:
            store.close()
    data = report.as_dict()
    if limit is None:
        data["limit"] = None
    data["at"] = time.time()
    if args.json:
        print(json.dumps(data))
    else:
        shown = "" if limit is None else f" of {limit}"
        print(f"quota {report.quota}: {report.held} held{shown}, "
              f"oldest heartbeat {report.oldest_age:.1f}s ago")
        for name in ("expired", "orphaned", "unknown"):
            for holder in data[name]:
                print(f"  {name:<8} {holder}")
    return 1 if args.fail_on_orphans and report.orphaned else 0


def provision(args: argparse.Namespace) -> int:
    """``leases provision``: exit 0 (created, or already there), 2 with one line."""
    from ..leases import SqliteLeaseStore

    where = "corevo-obs leases provision"
    if args.sqlite and (args.key or args.shards is not None):
        raise ConfigError("--key and --shards apply to --redis only", source=where)
    if args.shards is not None and (args.key or not 1 <= args.shards <= 64):
        raise ConfigError("--shards takes 1..64 and no --key", source=where)
    store: Any = None
    try:
        if args.redis and args.shards is not None:
            import redis

            from ..leases.sharded import ShardedLeaseStore

            client = redis.Redis.from_url(args.redis, socket_timeout=2.0,
                                          socket_connect_timeout=1.0)
            store = ShardedLeaseStore(args.quota, client, limit=args.shards,
                                      shards=args.shards)
        elif args.redis:
            from ..leases.redis_store import RedisLeaseStore

            store = RedisLeaseStore(args.quota, args.redis, key=args.key, limit=1,
                                    socket_timeout=2.0, connect_timeout=1.0)
        else:
            store = SqliteLeaseStore(args.quota, args.sqlite, limit=1)
        made = store.provision()
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - one clear line, not a traceback
        raise ConfigError(f"cannot provision the quota: {exc}", source=where) from None
    finally:
        if store is not None:
            store.close()
    print(f"quota {args.quota}: " + (
        "provisioned (its first request is served)" if made
        else "already provisioned" if args.redis
        else "SQLite store ready (it has no restart fence)"))
    return 0
