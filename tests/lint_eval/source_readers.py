"""Standard-library calls that read files or run programs inside: a frame's source lines
(``inspect``, through linecache), facts about the OS (``platform``, ``distro``)."""

import inspect
import platform
import traceback


async def debug_page(error: Exception) -> list[str]:
    lines = []
    for frame in inspect.getinnerframes(error.__traceback__):  # error: COB100
        lines.append(str(frame))
    return lines


async def identify() -> dict[str, str]:
    return {"os": f"{platform.system()} {platform.architecture()[0]}"}  # error: COB103


def user_agent() -> str:
    return f"client/1.0 {platform.platform()}"


async def request() -> str:
    return user_agent()  # error: COB110


async def log_error() -> str:
    return traceback.format_exc()  # an error path: left out of the catalog (docs/lint.md)
