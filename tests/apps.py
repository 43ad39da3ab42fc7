"""Harness for the framework tests: a fixed-latency upstream, app servers, scrapes."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from corevo_obs.demo.slow_upstream import SlowUpstream

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def upstream(latency: float = 0.1) -> Iterator[str]:
    """A fixed-latency HTTP upstream on loopback; yields its URL."""
    with SlowUpstream(latency) as server:
        yield server.url


def app_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.update(extra)
    return env


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0,
              log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            said = log.read_text(errors="replace") if log is not None else ""
            raise AssertionError(f"server exited with {proc.returncode}:\n{said}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port} after {timeout}s")


@contextlib.contextmanager
def serve(cmd: list[str], port: int, env: dict[str, str],
          log: Path | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """Run a server until the block ends; its output goes to ``log`` (a pipe nobody
    reads would fill and block it)."""
    out = open(log, "wb") if log is not None else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_port(port, proc, log=log)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if log is not None:
            out.close()  # type: ignore[union-attr]


def python(*args: str) -> list[str]:
    return [sys.executable, *args]


def get(url: str, headers: dict[str, str] | None = None) -> bytes:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as reply:
            return bytes(reply.read())
    except urllib.error.HTTPError as err:
        return bytes(err.read())


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, keyed by (name, sorted labels)."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str,
          **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in found.items() if n == name and want <= set(ls))


PROMETHEUS = "/usr/bin/prometheus"


@contextlib.contextmanager
def prometheus(tmp: Path, targets: list[str], rules: Path | None = None,
               interval: float = 1.0) -> Iterator[str]:
    """A real Prometheus scraping ``targets`` every ``interval`` seconds (evaluating
    ``rules`` as often, when given); yields its base URL."""

    web = _free_port()
    config: dict[str, object] = {
        "global": {"scrape_interval": f"{interval:g}s",
                   "scrape_timeout": f"{int(interval * 900)}ms",
                   "evaluation_interval": f"{interval:g}s"},
        "scrape_configs": [{"job_name": "app", "static_configs": [{"targets": targets}]}]}
    if rules is not None:
        config["rule_files"] = [str(rules)]
    with prometheus_server(tmp, config, web) as base:
        yield base


@contextlib.contextmanager
def prometheus_server(tmp: Path, config: Mapping[str, object], web: int,
                      *flags: str) -> Iterator[str]:
    """A real Prometheus on ``config`` (written to ``tmp``), its web UI on port ``web``,
    ready for queries; yields its base URL."""
    import yaml

    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={tmp / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp / 'tsdb'}", f"--web.listen-address=127.0.0.1:{web}",
         *flags, "--log.level=warn"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(web, proc)
        base = f"http://127.0.0.1:{web}"
        # the port opens before the TSDB is loaded; queries answer 503 until /-/ready does
        eventually("prometheus ready", lambda: _ready(f"{base}/-/ready"), timeout=30)
        yield base
    finally:
        proc.terminate()
        proc.wait(10)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return bool(reply.status == 200)
    except OSError:  # refused, reset, or an HTTPError (503 while starting)
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def promql(base: str, expr: str) -> list[dict[str, object]]:
    import json
    import urllib.parse

    q = urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(f"{base}/api/v1/query?{q}", timeout=5) as reply:
        body = json.loads(reply.read())
    assert body["status"] == "success", (expr, body)
    return list(body["data"]["result"])


def firing(base: str) -> list[dict[str, str]]:
    """The labels of every alert Prometheus has firing now."""
    import json

    with urllib.request.urlopen(f"{base}/api/v1/alerts", timeout=5) as reply:
        body = json.loads(reply.read())
    return [dict(a["labels"]) for a in body["data"]["alerts"] if a["state"] == "firing"]


def scalar(base: str, expr: str) -> float | None:
    found = promql(base, expr)
    return None if not found else float(found[0]["value"][1])  # type: ignore[index]


def eventually(what: str, check: object, timeout: float = 20.0) -> object:
    deadline = time.monotonic() + timeout
    got: object = None
    while time.monotonic() < deadline:
        got = check()  # type: ignore[operator]
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {got!r})")
