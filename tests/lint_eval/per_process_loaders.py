"""Loaders computed once per process on their first call (``platform.platform()``): nothing
runs them at start-up, so a chain to one from a coroutine is reported at medium, even behind
``functools.lru_cache`` (the first request waits). Twins: the same loader behind a
module-level ``is None`` memo, and an import loader reached through a helper (plugins are
often imported at start-up): low, not in the default output (marked with their tier)."""
import functools
import importlib
import platform

import distro

_OS: str | None = None


@functools.lru_cache(maxsize=None)
def platform_headers() -> dict[str, str]:
    return {"X-Stainless-OS": platform.platform(), "X-Distro": distro.id()}


def os_name() -> str:
    global _OS
    if _OS is None:
        _OS = platform.platform()
    return _OS


def plugin(name: str) -> object:
    return importlib.import_module(f"plugins.{name}")


async def request(name: str) -> None:
    headers = platform_headers()  # error: COB110 [medium]
    memo = os_name()  # error: COB110 [low]
    module = plugin(name)  # error: COB110 [low]
    print(headers, memo, module)
