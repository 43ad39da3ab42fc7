"""ASYNC212: a request method on a sync httpx / httpx2 client, whose type comes from an
annotation (plain, Optional, unions with None, strings), a default, a factory call, a
``with`` target, ``self`` attributes or a helper's return annotation."""
from __future__ import annotations

import typing
from typing import Optional, Union

import httpx
import httpx2


async def annotated(client: httpx.Client, url: str) -> None:
    client.get(url)  # error: ASYNC212
    client.post(url)  # error: ASYNC212
    client.put(url)  # error: ASYNC212
    client.patch(url)  # error: ASYNC212
    client.delete(url)  # error: ASYNC212
    client.head(url)  # error: ASYNC212
    client.options(url)  # error: ASYNC212
    client.request("GET", url)  # error: ASYNC212
    client.send(client.build_request("GET", url))  # error: ASYNC212
    client.stream("GET", url)  # error: ASYNC212
    client.close()  # error: ASYNC212


async def optional_forms(
    a: Optional[httpx.Client],
    b: httpx.Client | None,
    c: None | httpx.Client,
    d: "httpx.Client",
    e: typing.Optional["httpx.Client"],
    f: Union[httpx.Client, None],
    g: "httpx.Client | None",
) -> None:
    a.get("u")  # error: ASYNC212
    b.get("u")  # error: ASYNC212
    c.get("u")  # error: ASYNC212
    d.get("u")  # error: ASYNC212
    e.get("u")  # error: ASYNC212
    f.get("u")  # error: ASYNC212
    g.get("u")  # error: ASYNC212


async def parameter_kinds(p: httpx.Client, /, q: httpx2.Client, *, r: httpx.Client,
                          s: httpx.Client = httpx.Client(), t=httpx2.Client()) -> None:
    p.get("u")  # error: ASYNC212
    q.get("u")  # error: ASYNC212
    r.get("u")  # error: ASYNC212
    s.get("u")  # error: ASYNC212
    t.get("u")  # error: ASYNC212


def make_client() -> httpx.Client:
    return httpx.Client(timeout=5)


def make_quoted() -> "httpx2.Client":
    return httpx2.Client()


async def built_here(url: str) -> None:
    client = httpx.Client()
    client.get(url)  # error: ASYNC212
    with httpx2.Client() as c2:
        c2.get(url)  # error: ASYNC212
    made = make_client()
    made.get(url)  # error: ASYNC212
    make_quoted().post(url)  # error: ASYNC212
    with make_client() as wc:
        wc.delete(url)  # error: ASYNC212
    held: httpx.Client = make_client()
    held.head(url)  # error: ASYNC212


class Api:
    shared: httpx.Client

    def __init__(self, client: httpx.Client, backup: Optional[httpx2.Client] = None) -> None:
        self.client = client
        self.backup = backup
        self.own = httpx.Client()

    async def call(self, url: str) -> None:
        self.client.get(url)  # error: ASYNC212
        self.backup.get(url)  # error: ASYNC212
        self.own.get(url)  # error: ASYNC212
        self.shared.get(url)  # error: ASYNC212


async def not_blocking(ac: httpx.AsyncClient, other, url: str) -> None:
    await ac.get(url)
    async with httpx2.AsyncClient(verify=False) as c:  # its own construction: async210.py
        await c.get(url)
    other.get(url)  # unknown type
    req = httpx.Client().build_request("GET", url)  # builds a request, sends nothing
    str(req.url)
