"""The host aggregate (issue 34 item 4): exact sums, prometheus_client's text, a memo that
never serves a stale layout.

Real writers (``host_worker.py``: task stages through a ``StageRecorder``, a counter, a
gauge of every multiprocess mode) in real processes, SIGKILLed and compacted; the
reference is prometheus_client's own ``MultiProcessCollector`` with its own encoders.
"""

from __future__ import annotations

import contextlib
import glob
import gzip
import json
import os
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import choose_encoder
from prometheus_client.multiprocess import MultiProcessCollector

from corevo_obs.core.catalog import host_summed
from corevo_obs.exposition import BY_WORKER_ENV, MetricsServer, by_worker_setting
from corevo_obs.fastexpo import LineCache
from corevo_obs.mpdir import LockedMultiProcessCollector, compact
from corevo_obs.mpdir.dbfile import encode
from corevo_obs.mpdir.filecache import FileCache
from corevo_obs.mpdir.safe import DirFds
from tests.apps import samples

from .conftest import HELPERS, helper_cmd

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
FORMATS = ("", "application/openmetrics-text; version=1.0.0")
PROM_ACCEPT = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.2"


class Worker:
    def __init__(self, env: dict[str, str], name: str, kinds: str) -> None:
        self.proc = subprocess.Popen(
            helper_cmd("host_worker.py", "--kinds", kinds, "--tasks", "4"),
            env=dict(env, COREVO_WORKER=name), text=True, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE)
        self.pid = 0

    def ready(self) -> Worker:
        assert self.proc.stdout is not None
        self.pid = json.loads(self.proc.stdout.readline())["pid"]
        return self

    def tasks(self, kind: str, n: int) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"tasks {kind} {n}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok"

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


@contextlib.contextmanager
def three_workers(env: dict[str, str]) -> Iterator[list[Worker]]:
    """w0..w2 with kinds a,b / b,c / a,c: every kind on two workers (started at once)."""
    started = [Worker(env, f"w{i}", kinds) for i, kinds in enumerate(("a,b", "b,c", "a,c"))]
    try:
        yield [w.ready() for w in started]
    finally:
        for w in started:
            if w.proc.poll() is None:
                w.proc.kill()
            w.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def idle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A directory of three live, idle workers (read, never changed, by the tests)."""
    d = tmp_path_factory.mktemp("host") / "metrics"
    d.mkdir()
    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(d), PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).parent.parent), str(HELPERS)]))
    env.pop("COREVO_WORKER", None)
    with three_workers(env):
        yield d


def _text(registry: CollectorRegistry) -> Samples:
    return samples(generate_latest(registry).decode())


def _reader(d: Path, *, by_worker: bool) -> CollectorRegistry:
    reg = CollectorRegistry()
    LockedMultiProcessCollector(reg, path=str(d), by_worker=by_worker)
    return reg


class _Merged:
    """prometheus_client's own merge of ``d``'s files, in the order the suite reads them
    (sorted names; ``MultiProcessCollector`` takes glob's order, which varies)."""

    def __init__(self, d: Path) -> None:
        self._files = sorted(glob.glob(str(d / "*.db")))

    def collect(self) -> object:
        return MultiProcessCollector.merge(self._files, accumulate=True)


def test_same_bytes_as_prometheus_client_in_both_formats(idle):
    plain = _Merged(idle)
    ours = _reader(idle, by_worker=True)
    cache = LineCache()
    for _ in range(2):  # cold, then warm (memoised layouts, slots and prefixes)
        for accept in FORMATS:
            encoder, content_type = choose_encoder(accept)
            expected = encoder(plain)
            assert b"corevo_task_first_event_seconds_bucket" in expected
            assert encoder(ours) == expected
            assert cache.render(ours.collect(), encoder, content_type) == expected


def test_host_sum_is_the_sum_of_the_workers_and_the_rest_keeps_worker(idle):
    d = idle
    per_worker, host = _text(_reader(d, by_worker=True)), _text(_reader(d, by_worker=False))
    summed = host_summed()
    expected: Samples = {}
    for (name, labels), v in per_worker.items():
        family = name.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
        if family in summed:
            key = (name, tuple(p for p in labels if p[0] != "worker"))
            expected[key] = expected.get(key, 0.0) + v
        else:
            expected[(name, labels)] = v
    assert host == expected
    # 3 workers, 3 kinds, each kind on two workers: every host series sums two workers
    assert host[("corevo_task_total_seconds_count",
                  (("kind", "b"), ("outcome", "completed")))] \
        == sum(v for (n, ls), v in per_worker.items() if n == "corevo_task_total_seconds_count"
               and ("kind", "b") in ls and ("outcome", "completed") in ls) > 0
    assert not any(("worker", w) in ls for (n, ls) in host for w in ("w0", "w1", "w2")
                   if n.startswith("corevo_task_") and n != "corevo_task_mark_errors_total")
    assert any(("worker", "w1") in ls for (n, ls) in host if n.startswith("hw_events"))
    assert len(host) < len(per_worker)


def _monotonic(before: Samples, after: Samples) -> list[str]:
    return [f"{k}: {v} -> {after.get(k)}" for k, v in before.items()
            if k[0].endswith(("_total", "_count", "_sum", "_bucket"))
            and after.get(k, 0.0) < v]


@pytest.mark.parametrize("by_worker", [False, True])
def test_a_warm_reader_reads_what_a_fresh_one_reads_through_growth_death_and_compaction(
        worker_env, by_worker):
    with three_workers(worker_env) as workers:
        _growth_death_compaction(Path(worker_env["PROMETHEUS_MULTIPROC_DIR"]), workers,
                                 by_worker)


def _growth_death_compaction(d: Path, workers: list[Worker], by_worker: bool) -> None:
    warm = _reader(d, by_worker=by_worker)
    last = _text(warm)

    def kill() -> None:
        os.kill(workers[2].pid, signal.SIGKILL)
        workers[2].proc.wait(30)

    def stop() -> None:
        workers[0].stop()
        compact(d)

    steps = [
        lambda: workers[0].tasks("a", 3),  # values move, the layout stays
        lambda: workers[1].tasks("d", 2),  # a new kind: the files grow
        kill,
        lambda: compact(d),  # w2's files fold into accumulators (new files, new names)
        lambda: workers[0].tasks("d", 1),
        stop,  # a clean exit, compacted again
    ]
    for step in steps:
        step()
        now = _text(warm)
        assert now == _text(_reader(d, by_worker=by_worker))
        assert _monotonic(last, now) == []
        last = now
    tasks = {(n, ls): v for (n, ls), v in last.items() if n == "corevo_task_total_seconds_count"}
    assert sum(v for (_, ls), v in tasks.items() if ("kind", "d") in ls) == 3
    assert sum(v for (_, ls), v in tasks.items() if ("kind", "a") in ls) == 4 + 3 + 4
    events = {ls: v for (n, ls), v in last.items() if n == "hw_events_total"}
    assert events[(("kind", "a"), ("worker", "w0"))] == 7  # exited, compacted
    assert events[(("kind", "a"), ("worker", "w2"))] == 4  # SIGKILLed, compacted


def test_a_file_replaced_by_one_of_the_same_size_is_parsed_again(tmp_path):
    def write(label: str, value: float) -> None:
        key = json.dumps(["x", "x_total", {"kind": label}, "help"])
        data = encode({key: (value, 0.0)})
        (tmp_path / "counter_1.db.tmp").write_bytes(data)
        os.replace(tmp_path / "counter_1.db.tmp", tmp_path / "counter_1.db")

    cache = FileCache()
    seen = []
    with DirFds(tmp_path) as fds:
        for label, value in (("aa", 1.0), ("aa", 2.0), ("aa", 2.0), ("bb", 3.0)):
            write(label, value)
            layout, values, _ = cache.read(fds.top, "counter_1.db", "counter_1.db",
                                           accumulator=False)
            seen.append((json.loads(layout.keys[0])[2]["kind"], values[0]))
    assert seen == [("aa", 1.0), ("aa", 2.0), ("aa", 2.0), ("bb", 3.0)]


def test_by_worker_setting(monkeypatch):
    for raw, want in (("", False), ("0", False), ("1", True), ("yes", True), ("bogus", False)):
        monkeypatch.setenv(BY_WORKER_ENV, raw)
        assert by_worker_setting() is want


def test_the_endpoint_serves_prometheus_its_format_gzipped(idle, monkeypatch):
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(idle))
    monkeypatch.delenv(BY_WORKER_ENV, raising=False)
    with MetricsServer(port=0, scope="host") as server:
        req = urllib.request.Request(server.url, headers={
            "Accept": PROM_ACCEPT, "Accept-Encoding": "gzip"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
            assert resp.headers["Content-Encoding"] == "gzip"
            body = gzip.decompress(resp.read()).decode()
        assert body.endswith("# EOF\n") and body.count("# EOF") == 1
        assert 'corevo_task_dispatch_seconds_count{kind="a"}' in body
        assert "corevo_metrics_dir_files " in body  # the directory's health, same response
        # ``name[]`` takes prometheus_client's own path (which filters by the names a
        # collector describes: none for a multiprocess reader, so nothing, as before)
        with urllib.request.urlopen(f"{server.url}?name[]=hw_events_total", timeout=30) as resp:
            assert resp.status == 200 and "corevo_task" not in resp.read().decode()
