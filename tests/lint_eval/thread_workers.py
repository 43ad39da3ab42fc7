"""Functions that a decorator or a worker API runs in a thread do not block the loop:
``thread=True`` given to a decorator or worker call (textual's ``@work(thread=True)``,
``run_worker(fn, thread=True)``), or a decorator whose code hands the function to
``threading.Thread`` or an offload. Without it the body runs on the loop."""

import asyncio
import functools
import threading
import time


def work(*, thread: bool = False):
    def decorate(fn):
        return fn
    return decorate


def in_thread(fn):
    @functools.wraps(fn)
    def start(*args, **kwargs):
        threading.Thread(target=fn, args=args, kwargs=kwargs, daemon=True).start()
    return start


def in_executor(fn):
    @functools.wraps(fn)
    def submit(*args):
        return asyncio.get_running_loop().run_in_executor(None, fn, *args)
    return submit


def logged(fn):
    @functools.wraps(fn)
    def call(*args):
        print(fn.__name__)
        return fn(*args)
    return call


class App:
    def run_worker(self, fn, *, thread: bool = False):
        return fn

    @work(thread=True)
    def refresh(self) -> None:
        time.sleep(1)

    @work()
    def refresh_here(self) -> None:
        time.sleep(1)

    @work(thread=True)
    async def poll(self) -> None:
        time.sleep(1)  # the worker thread's own event loop runs it

    @work()
    async def poll_here(self) -> None:
        time.sleep(1)  # error: COB104 [high]

    @in_thread
    def download(self) -> None:
        time.sleep(1)

    @in_executor
    def compute(self) -> None:
        time.sleep(1)

    @logged
    def traced(self) -> None:
        time.sleep(1)

    async def on_mount(self) -> None:
        self.refresh()
        self.download()
        await self.compute()
        self.run_worker(lambda: time.sleep(1), thread=True)

    async def on_click(self) -> None:
        self.refresh_here()  # error: COB110 [medium]
        self.traced()  # error: COB110 [medium]
        self.run_worker(lambda: time.sleep(1))  # error: COB104 [high]
