"""The pytest plugin, driven through pytester on small inner test files."""

from __future__ import annotations

import asyncio

import pytest

from corevo_obs.core.marker import blocking, guard_enabled
from corevo_obs.integrations.pytest_plugin import LoopBlocked, assert_loop_responsive

pytest_plugins = ["pytester"]

BLOCKING_READ = '''
import asyncio
import os
import threading


async def handler(fd):
    return os.read(fd, 1)  # BLOCKING-READ


async def offloaded(fd):
    return await asyncio.to_thread(os.read, fd, 1)


def _serve(handler, budget):
    async def main():
        r, w = os.pipe()
        threading.Timer(0.3, os.write, (w, b"x")).start()
        async with budget:
            assert await handler(r) == b"x"
        await asyncio.sleep(0.01)  # the unrelated heartbeat kept ticking
    asyncio.run(main())


def test_blocking_read(loop_probe):
    _serve(handler, loop_probe(budget=0.1))


def test_offloaded_read(loop_probe):
    _serve(offloaded, loop_probe())
'''


def _line(source: str, needle: str) -> int:
    return next(i for i, t in enumerate(source.splitlines(), 1) if needle in t)


def test_probe_fails_a_blocking_read_naming_the_line_and_passes_the_offloaded_one(pytester):
    path = pytester.makepyfile(test_reads=BLOCKING_READ)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    line = _line(path.read_text(), "BLOCKING-READ")
    result.stdout.fnmatch_lines([
        "*LoopBlocked: event loop blocked 0.*s, budget 0.100s (1 stall(s) over budget)",
        f"*stalled 0.*s at {path}:{line}:handler",
        f"*{path}:{line}:handler <-- innermost project frame",
        "FAILED test_reads.py::test_blocking_read - *",
    ])
    assert "test_offloaded_read FAILED" not in result.stdout.str()


def test_budget_comes_from_the_ini_and_a_bad_value_names_its_source(pytester):
    pytester.makepyfile(test_reads=BLOCKING_READ.replace("loop_probe(budget=0.1)", "loop_probe()"))
    pytester.makeini("[pytest]\ncorevo_loop_budget = 1.0\n")
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)
    result = pytester.runpytest("-p", "no:cacheprovider", "--corevo-loop-budget", "fast")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*--corevo-loop-budget: cannot parse 'fast' as seconds*"])


GUARDED = '''
import asyncio

import pytest

from corevo_obs import blocking
from corevo_obs.core.marker import BlockingCallError


@blocking
def read_config():
    return "cfg"


class Store:
    @blocking
    def get(self):
        return "row"


def test_on_the_loop_thread():
    async def main():
        return read_config()
    with pytest.raises(BlockingCallError, match=r"test_guarded.read_config\\(\\) on the event"):
        asyncio.run(main())

    async def method():
        return Store().get()
    with pytest.raises(BlockingCallError, match=r"Store.get\\(\\)"):
        asyncio.run(method())


def test_module_imported_by_conftest():
    import app_store

    async def main():
        return app_store.load()
    with pytest.raises(BlockingCallError, match=r"app_store.load"):
        asyncio.run(main())


def test_off_the_loop_and_offloaded():
    async def main():
        return await asyncio.to_thread(read_config)
    assert read_config() == "cfg" and asyncio.run(main()) == "cfg"
'''


def _guarded_files(pytester) -> None:
    """The test file, plus a module marked at import time of conftest.py (before tests)."""
    pytester.makepyfile(
        test_guarded=GUARDED,
        app_store="from corevo_obs import blocking\n\n@blocking\ndef load():\n    return 1\n",
        conftest="import app_store  # noqa: F401\n",
    )


def test_guard_flag_makes_blocking_calls_on_the_loop_raise(pytester):
    _guarded_files(pytester)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--corevo-blocking-guard")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["corevo-obs: @blocking guard on"])


def test_guard_ini_key_and_off_by_default(pytester):
    _guarded_files(pytester)
    off = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    off.assert_outcomes(passed=1, failed=2)  # guard off: nothing raises
    off.stdout.fnmatch_lines(["*DID NOT RAISE*"])
    pytester.makeini("[pytest]\ncorevo_blocking_guard = true\n")
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=3)


def test_marker_is_the_same_function_when_the_guard_is_off():
    assert not guard_enabled()

    def read() -> str:
        return "x"

    assert blocking(read) is read


def test_assert_loop_responsive_outside_pytest_fixtures():
    async def main(seconds: float) -> None:
        async with assert_loop_responsive(0.05):
            await asyncio.sleep(0.01)
            if seconds:
                import time

                time.sleep(seconds)  # noqa: ASYNC251, COB104 - the stall under test

    asyncio.run(main(0))
    with pytest.raises(LoopBlocked) as info:
        asyncio.run(main(0.2))
    assert len(info.value.reports) == 1 and info.value.reports[0].captured
    assert info.value.reports[0].culprit.function == "main"


def test_guard_module_wraps_functions_marked_before_the_guard():
    import types

    from corevo_obs.core.marker import BlockingCallError, guard_module

    mod = types.ModuleType("legacy_app")
    exec(  # noqa: S102 - a module defined before the guard was on
        "from corevo_obs import blocking\n"
        "@blocking\ndef read(): return 1\n"
        "def fast(): return 2\n"
        "class Store:\n"
        "    @blocking\n    def get(self): return 3\n"
        "    @staticmethod\n    @blocking\n    def load(): return 4\n",
        mod.__dict__,
    )
    assert guard_module(mod) == 3 and guard_module(mod) == 0
    assert (mod.read(), mod.fast(), mod.Store().get(), mod.Store.load()) == (1, 2, 3, 4)

    async def on_loop(call):
        return call()

    for call in (mod.read, mod.Store().get, mod.Store.load):
        with pytest.raises(BlockingCallError):
            asyncio.run(on_loop(call))
    assert asyncio.run(on_loop(mod.fast)) == 2
