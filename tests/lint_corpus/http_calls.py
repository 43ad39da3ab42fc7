import asyncio
import http.client
import urllib.request
from functools import partial

import httpx
import requests as r
import urllib3
from requests import get as fetch


async def positives(url: str) -> None:
    r.get(url)  # error: COB101
    fetch(url)  # error: COB101
    urllib.request.urlopen(url)  # error: COB101
    with httpx.Client() as client:
        client.get(url)  # error: COB101
    session = r.Session()
    session.post(url)  # error: COB101
    http.client.HTTPSConnection("h").request("GET", "/")  # error: COB101
    urllib3.PoolManager().request("GET", url)  # error: COB101
    httpx.get(url)  # error: COB101


async def negatives(url: str) -> None:
    async with httpx.AsyncClient() as client:  # error: COB100 (loads the CA bundle)
        await client.get(url)
    await asyncio.to_thread(partial(r.get, url))
    await asyncio.to_thread(r.get, url)
    r.Request("GET", url)
