"""ASYNC211: ``x.request("GET", ...)`` on an object of unknown type in a module that uses
urllib3: a likely sync HTTP request."""
import urllib3


async def likely_requests(pool, url: str) -> None:
    pool.request("GET", url)  # error: ASYNC211
    pool.request("post", url, body=b"")  # error: ASYNC211
    pool.request("DELETE", url)  # error: ASYNC211


async def not_requests(pool, session, url: str) -> None:
    await session.request("GET", url)  # awaited: an async client
    pool.request(url)  # no HTTP method as the first argument
    pool.request("FETCH", url)  # not an HTTP method


manager = urllib3.PoolManager()
