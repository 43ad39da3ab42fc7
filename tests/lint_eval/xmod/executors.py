"""A decorator that makes a sync method a coroutine by handing it, through a helper of the
module, to the loop's executor (``functools.partial`` of it, given by the ``func=``
keyword): read from the code, not the names. The false twin awaits a wrapper that calls
the function in place."""

import functools
from functools import wraps


def executor_decorator(func):
    @wraps(func)
    async def wrapper(*args, **kwargs):
        return await run_in_executor(args[0], func, *args, **kwargs)

    return wrapper


async def run_in_executor(owner, fn, *args, **kwargs):
    preloaded = functools.partial(fn, *args, **kwargs)
    return await owner.loop.run_in_executor(executor=owner.executor, func=preloaded)


def in_place(func):
    @wraps(func)
    async def wrapper(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapper
