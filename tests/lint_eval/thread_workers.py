"""Functions that a decorator or a worker API runs in a thread do not block the loop:
``thread=True`` given to a decorator or worker call (textual's ``@work(thread=True)``,
``run_worker(fn, thread=True)``), or a decorator whose code hands the function to
``threading.Thread`` or an offload. Without it the body runs on the loop.

A decorator whose code the lint cannot read (``aiomisc.threaded``, from a dependency that
is not installed): a plain ``def`` so decorated whose result is awaited (``await f()``,
``gather(f())``, ``create_task(f())``) was made awaitable by it, and the decorators that do
that to a plain def run it in a thread; which one this is stays a guess, so the chain is
``low``. The false twins keep ``medium``: the same def called without ``await``, a decorator
whose code is here and that keeps the body on the loop, a plain def that returns an
awaitable itself, a generator (``@gen.coroutine`` runs it on the loop)."""

import asyncio
import functools
import socket
import threading
import time

from aiomisc import threaded
from tornado import gen


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


def on_loop(fn):
    @functools.wraps(fn)
    async def run(*args):
        return fn(*args)  # awaitable, but the body runs on the loop
    return run


class Server:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    @threaded
    def accept(self) -> socket.socket:
        return self.sock.accept()[0]

    @threaded
    def pause(self) -> None:
        time.sleep(1)

    @on_loop
    def drain(self) -> None:
        time.sleep(1)

    def later(self):
        time.sleep(1)  # before the awaitable is made: on the loop
        return asyncio.sleep(0)

    @gen.coroutine
    def legacy(self):
        time.sleep(1)
        yield gen.moment

    async def serve(self) -> None:
        await self.accept()  # error: COB110 [low]
        await asyncio.gather(self.pause(), self.accept())  # error: COB110 [low]
        asyncio.create_task(self.pause())  # error: COB110 [low]
        await asyncio.wait_for(self.pause(), 2)  # error: COB110 [low]

    async def serve_here(self) -> None:
        self.pause()  # error: COB110 [medium]
        await self.drain()  # error: COB110 [medium]
        await self.later()  # error: COB110 [medium]
        await self.legacy()  # error: COB110 [medium]
