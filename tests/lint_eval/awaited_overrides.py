"""A library class's sync method reached through a project subclass. Awaiting its result
says the subclass made it awaitable (jupyterhub's test session hands requests to a thread
pool), so the call is not the library's blocking one; a subclass that changes nothing
still blocks."""
import asyncio
from concurrent.futures import ThreadPoolExecutor

import requests

_pool = ThreadPoolExecutor(2)


class PooledSession(requests.Session):
    """Each request runs in the pool: ``request()`` returns an awaitable future."""

    def request(self, *args, **kwargs):
        return asyncio.wrap_future(_pool.submit(super().request, *args, **kwargs))


class PlainSession(requests.Session):
    """A session with a default header: its requests run where they are called."""

    def __init__(self) -> None:
        super().__init__()
        self.headers["X-App"] = "eval"


async def pooled(url: str) -> None:
    session = PooledSession()
    await session.get(url)
    await asyncio.gather(session.post(url), session.head(url))


async def plain(url: str) -> None:
    session = PlainSession()
    session.get(url)  # error: COB101 [medium]
    session.post(url, data=b"x")  # error: COB101 [medium]
