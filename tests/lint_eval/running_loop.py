# A branch a running-loop check rules out: a constructor that attaches to the running loop
# when there is one, and otherwise starts a thread and waits for it to be ready. Called
# from a coroutine a loop runs, so the wait never happens; called where nothing says so
# (a helper that does not test the loop, a test of another loop) it stays a finding.
import asyncio
import contextlib
import threading


def get_running_loop() -> asyncio.AbstractEventLoop | None:
    """The running loop, None outside one."""
    with contextlib.suppress(RuntimeError):
        return asyncio.get_running_loop()
    return None


def current_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class Engine:
    def __init__(self, use_asyncio: bool | None = None) -> None:
        self._use_asyncio = use_asyncio
        self.loop: asyncio.AbstractEventLoop | None = None
        self.start()

    def start(self) -> None:
        self.loop = None if self._use_asyncio is False else get_running_loop()
        if self.loop:
            return
        self._start_thread()

    def _start_thread(self) -> None:
        ready = threading.Event()
        threading.Thread(target=ready.set, daemon=True).start()
        ready.wait()


class Browser:
    """zeroconf's shape across methods: ``start()`` binds the running loop (None outside
    one, then a thread's own loop), ``close()`` skips the wait when called on that loop."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.done = threading.Event()

    def start(self) -> None:
        self.loop = get_running_loop()

    def close(self) -> None:
        if self.loop == get_running_loop():
            return
        self.done.wait()


async def shut(browser: Browser) -> None:
    # a loop runs here, but not necessarily the one ``browser.loop`` holds: an object
    # started in sync code (or on another thread's loop) waits; kept (docs/lint.md)
    browser.close()  # error: COB110


def attach() -> None:
    loop = current_loop()
    if loop is None:
        threading.Event().wait()


def attach_policy() -> None:
    if not asyncio.get_event_loop().is_running():
        threading.Event().wait()


def attach_private() -> None:
    if asyncio._get_running_loop() is not None:
        return
    threading.Event().wait()


def attach_probe() -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is None:
        threading.Event().wait()


def attach_inline() -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        threading.Event().wait()


def probe_and_more(path: str) -> None:
    try:
        asyncio.get_running_loop()
        path.encode()  # more than the probe: the clause may run with a loop
    except RuntimeError:
        threading.Event().wait()


def attach_other(loop: asyncio.AbstractEventLoop) -> None:
    if not loop.is_running():  # another loop may be stopped while this one runs
        threading.Event().wait()


def unchecked() -> None:
    threading.Event().wait()


def on_loop_only() -> None:
    if get_running_loop():  # the wait is on the branch a running loop takes
        threading.Event().wait()


async def in_a_coroutine() -> None:
    Engine()
    attach()
    attach_policy()
    attach_private()
    attach_probe()
    attach_inline()
    probe_and_more("x")  # error: COB110
    Engine(use_asyncio=False)  # error: COB110
    attach_other(asyncio.new_event_loop())  # error: COB110
    unchecked()  # error: COB110
    on_loop_only()  # error: COB110
