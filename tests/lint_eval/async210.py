"""ASYNC210: a module-level request function of a sync HTTP library inside async def."""
import urllib.request
import urllib3
from urllib import request
from urllib.request import urlopen

import httpx
import httpx2
import requests


async def module_functions(url: str) -> None:
    requests.get(url)  # error: ASYNC210
    requests.post(url, data=b"")  # error: ASYNC210
    requests.put(url)  # error: ASYNC210
    requests.patch(url)  # error: ASYNC210
    requests.delete(url)  # error: ASYNC210
    requests.head(url)  # error: ASYNC210
    requests.options(url)  # error: ASYNC210
    requests.request("GET", url)  # error: ASYNC210
    httpx.get(url)  # error: ASYNC210
    httpx.post(url)  # error: ASYNC210
    httpx.request("GET", url)  # error: ASYNC210
    httpx2.get(url)  # error: ASYNC210
    httpx2.delete(url)  # error: ASYNC210
    httpx2.request("PUT", url)  # error: ASYNC210
    urllib3.request("GET", url)  # error: ASYNC210
    urllib.request.urlopen(url)  # error: ASYNC210
    request.urlopen(url)  # error: ASYNC210
    urlopen(url)  # error: ASYNC210


async def not_requests(url: str) -> None:
    async with httpx.AsyncClient() as client:  # error: COB100 (loads the CA bundle)
        await client.get(url)
    async with httpx2.AsyncClient() as client2:  # error: COB100 (loads the CA bundle)
        await client2.post(url)
    httpx.URL(url)  # builds a value, sends nothing
    requests.Request("GET", url).prepare()


def sync_code_may_block(url: str) -> None:
    requests.get(url)
