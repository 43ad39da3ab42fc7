"""A stall is reported while it lasts: logged at once past ``ongoing_after`` and at
doubling ages, its age in a gauge a scrape reads off the loop, the end still logged."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time

import pytest

from corevo_obs import install_loop_health
from corevo_obs.core.errors import ConfigError
from corevo_obs.mpdir.stalls import clear_ongoing, read_ongoing, write_ongoing

GAUGE = "corevo_event_loop_stall_in_progress_seconds"


async def handler_freezes(seconds: float) -> None:
    time.sleep(seconds)  # noqa: ASYNC251 FREEZE-LINE


def _freeze(registry, seconds: float, **options):
    """Freeze a real loop for ``seconds``; sample the gauge from a side thread."""
    seen: list[tuple[float, float | None]] = []
    stop = threading.Event()

    def scrape(t0: float) -> None:
        while not stop.wait(0.05):
            seen.append((time.monotonic() - t0,
                         registry.get_sample_value(GAUGE, {"worker": "g0"})))

    async def main():
        health = install_loop_health(registry=registry, worker="g0", interval=0.01,
                                     **options)
        await asyncio.sleep(0.1)
        assert registry.get_sample_value(GAUGE, {"worker": "g0"}) == 0.0  # a value from start
        t0, wall0 = time.monotonic(), time.time()
        side = threading.Thread(target=scrape, args=(t0,), daemon=True)
        side.start()
        await handler_freezes(seconds)
        await asyncio.sleep(0.2)
        stop.set()
        side.join()
        after = registry.get_sample_value(GAUGE, {"worker": "g0"})
        await health.aclose()
        return health, after, wall0

    return asyncio.run(main()), seen


def test_long_stall_is_logged_while_it_lasts_and_the_gauge_follows_it(registry, caplog):
    with caplog.at_level("WARNING", logger="corevo_obs.stall"):
        (health, after, t0), seen = _freeze(registry, 4.5, log_interval=60)
    records = [r for r in caplog.records if r.name == "corevo_obs.stall"]
    ongoing = [r for r in records if r.corevo_stall["ongoing"]]
    final = [r for r in records if not r.corevo_stall["ongoing"]]
    # at about 1 s, 2 s and 4 s of the stall, then the end (not throttled by log_interval)
    assert [round(r.corevo_stall["duration_seconds"]) for r in ongoing] == [1, 2, 4]
    assert len(final) == 1 and final[0].corevo_stall["duration_seconds"] >= 4.4
    first = ongoing[0]
    assert first.created - t0 < 2.5 and first.corevo_stall["culprit"]["function"] == \
        "handler_freezes"
    line = first.getMessage().splitlines()[0]
    assert "STILL STALLED" in line and f"pid={first.corevo_stall['pid']} worker=g0" in line
    assert first.corevo_stall["cause"] == "blocking"
    # the gauge grows while frozen (read from another thread), 0 once the loop is back
    during = [v for at, v in seen if 1.0 < at < 4.0]
    assert during and min(during) > 0.5 and max(during) > 3.0, seen
    assert after == 0.0 and health.watchdog is not None and health.watchdog.ongoing is None


def test_short_stall_gets_only_its_final_line(registry, caplog):
    with caplog.at_level("WARNING", logger="corevo_obs.stall"):
        _freeze(registry, 0.4)
    records = [r for r in caplog.records if r.name == "corevo_obs.stall"]
    assert [r.corevo_stall["ongoing"] for r in records] == [False]


def test_json_log_lines_stand_alone(registry, caplog):
    with caplog.at_level("WARNING", logger="corevo_obs.stall"):
        _freeze(registry, 1.5, log_format="json", ongoing_after=0.5)
    lines = [json.loads(r.getMessage()) for r in caplog.records
             if r.name == "corevo_obs.stall"]
    assert [d["ongoing"] for d in lines] == [True, True, False]
    for d in lines:
        assert d["event"] == "stall" and d["worker"] == "g0" and isinstance(d["pid"], int)
        assert d["time"].endswith("Z") and d["culprit"]["function"] == "handler_freezes"


def test_bad_options_name_their_source(monkeypatch, registry):
    monkeypatch.setenv("COREVO_LOOP_LOG_FORMAT", "xml")

    async def main():
        install_loop_health(registry=registry, worker="g0")

    with pytest.raises(ConfigError, match=r"\$COREVO_LOOP_LOG_FORMAT"):
        asyncio.run(main())


def test_ongoing_file_is_read_as_hostile_input(tmp_path):
    report = {"worker": "w1", "duration_seconds": 12.5, "ended_at": time.time(),
              "cause": "blocking", "culprit": {"file": "app.py", "line": 3, "function": "h"},
              "project_frames": ["app.py:3:h"]}
    write_ongoing(tmp_path, report)
    import os

    got = read_ongoing(tmp_path, os.getpid())
    assert got is not None and got.where == "app.py:3:h" and got.seconds == 12.5
    assert "12.5s at app.py:3:h [blocking]" in got.describe()
    clear_ongoing(tmp_path)
    assert read_ongoing(tmp_path, os.getpid()) is None
    stalls = tmp_path / ".corevo" / "stalls"
    # planted: a symlink to a readable file, garbage, a wrong pid inside, a FIFO
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({**report, "pid": 7}))
    (stalls / "7.json").symlink_to(secret)
    (stalls / "8.json").write_text("{not json")
    (stalls / "9.json").write_text(json.dumps({"pid": 10, "worker": "w1"}))
    os.mkfifo(stalls / "11.json")
    logging.getLogger().info("planted")
    assert [read_ongoing(tmp_path, p) for p in (7, 8, 9, 11)] == [None] * 4
