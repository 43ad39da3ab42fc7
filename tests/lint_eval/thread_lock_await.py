"""A thread lock held across an await: the next task that takes it while the holder waits
blocks the loop's thread, and the holder can never resume to release it. Twins: the same
lock held without an await (it waits only for other threads: not reported), an asyncio lock,
an await inside a def nested in the block (it runs later, outside the lock), and an
``async with`` on an asyncio condition whose body does not await (entering an uncontended one
does not suspend)."""
import asyncio
import multiprocessing
import threading
from typing import Any

_REGISTRY_LOCK = threading.RLock()


class TokenPolicy:
    def __init__(self, credential: Any) -> None:
        self.credential = credential
        self._lock = threading.Lock()
        self._async_lock = asyncio.Lock()
        self._token: str | None = None

    async def on_request(self) -> str:
        with self._lock:  # error: COB108
            if self._token is None:
                self._token = await self.credential.get_token()
        return self._token

    async def cached(self) -> str | None:
        with self._lock:
            return self._token

    async def refresh(self) -> str:
        async with self._async_lock:
            self._token = await self.credential.get_token()
        return self._token

    async def notify(self, condition: asyncio.Condition) -> None:
        with self._lock:
            async with condition:
                condition.notify_all()

    async def later(self) -> Any:
        with self._lock:
            async def fetch() -> str:
                return await self.credential.get_token()
        return fetch


async def register(name: str, sem: threading.Semaphore, ready: asyncio.Event) -> None:
    with _REGISTRY_LOCK:  # error: COB108
        await ready.wait()
    with sem:  # error: COB108
        await asyncio.sleep(0)
    with multiprocessing.Lock():  # error: COB108
        async for _ in _ticks():
            pass


async def _ticks() -> Any:
    yield name_of()


def name_of() -> str:
    with _REGISTRY_LOCK:
        return "x"
