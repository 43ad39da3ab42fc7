"""Coroutines calling methods of instances another module builds at its top level."""

from tests.lint_eval.xmod import singletons
from tests.lint_eval.xmod.singletons import auth, either, http


async def login(password: bytes, hashed: bytes) -> bool:
    return auth.check(password, hashed)  # error: COB110 [medium]


async def whoami() -> str:
    return singletons.auth.name()


async def fetch(url: str) -> bytes:
    return http.get(url).content  # error: COB101


async def wait() -> None:
    either.pause()
