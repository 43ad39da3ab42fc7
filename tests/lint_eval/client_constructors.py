"""An httpx client or transport built on the loop loads certifi's CA bundle into a new
SSL context; given its own context, ``verify=False`` or its own transport, it loads none."""

import ssl

import httpx

CONTEXT = ssl.create_default_context()


async def per_request(url: str) -> int:
    async with httpx.AsyncClient() as client:  # error: COB100
        return (await client.get(url)).status_code


async def shared_context(url: str) -> int:
    async with httpx.AsyncClient(verify=CONTEXT) as client:
        return (await client.get(url)).status_code


async def unverified() -> httpx.AsyncClient:
    return httpx.AsyncClient(verify=False, timeout=5)


async def own_transport(transport: httpx.AsyncBaseTransport) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=transport)


async def options(**kwargs: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(**kwargs)  # may hold verify=


def make_client(base_url: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=base_url, verify=True)


async def setup(base_url: str) -> httpx.AsyncClient:
    return make_client(base_url)  # error: COB110
