"""What a chain's message says about where the code runs: a callback a plain ``def``
hands the loop runs *on the loop*, not "inside async def", and a protocol callback's
chain names the callback once (audit 2026-12-07d's irc3 messages)."""

from __future__ import annotations

from pathlib import Path

from corevo_obs.tooling.lint import lint_paths

SOURCE = '''\
import asyncio
import time


def tick() -> None:
    time.sleep(1)


def start(loop: asyncio.AbstractEventLoop) -> None:
    loop.call_soon(tick)


class Proto(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.log = open("/var/log/proto.log", "a")
'''


def _messages(tmp_path: Path) -> dict[int, str]:
    src = tmp_path / "callbacks.py"
    src.write_text(SOURCE)
    return {f.line: f.message for f in lint_paths([str(src)]).findings}


def test_a_callback_a_plain_def_hands_the_loop_runs_on_the_loop(tmp_path: Path) -> None:
    said = _messages(tmp_path)[10]
    assert "on the loop in start (a callback it hands the loop)" in said, said
    assert "async def" not in said, said


def test_a_protocol_callback_is_named_once_in_its_chain(tmp_path: Path) -> None:
    # a protocol base of another module: the run, not the file, finds the callback
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text("import asyncio\n\n\nclass Base(asyncio.Protocol):\n"
                                 "    pass\n")
    (pkg / "proto.py").write_text(
        "from pkg.base import Base\n\n\nclass Proto(Base):\n"
        "    def connection_made(self, transport: object) -> None:\n"
        "        self.log = open('/var/log/proto.log', 'a')\n")
    said = [f.message for f in lint_paths([str(pkg)]).findings]
    assert len(said) == 1, said
    assert said[0].endswith(": Proto.connection_made -> open()"), said


def test_a_process_join_is_named_for_a_process(tmp_path: Path) -> None:
    src = tmp_path / "procs.py"
    src.write_text("import multiprocessing\nimport threading\n\n\n"
                   "async def stop(p: multiprocessing.Process, t: threading.Thread) -> None:\n"
                   "    p.join(5)\n    t.join()\n")
    said = {f.line: f.message for f in lint_paths([str(src)]).findings}
    assert said[6].startswith("Process.join() waits"), said
    assert said[7].startswith("Thread.join() waits"), said
