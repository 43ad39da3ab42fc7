"""Decorators of a module that defines no coroutine (read only because a chain reaches a
def they decorate): one hands the function to a thread, one to anyio's worker threads,
one calls it in place."""

import functools
import threading

from anyio import to_thread


def in_background(fn):
    @functools.wraps(fn)
    def start(*args):
        threading.Thread(target=fn, args=args, daemon=True).start()
    return start


def in_pool(fn):
    @functools.wraps(fn)
    def submit(*args):
        return to_thread.run_sync(fn, *args)
    return submit


def counted(fn):
    @functools.wraps(fn)
    def call(*args):
        call.calls += 1
        return fn(*args)
    call.calls = 0
    return call
