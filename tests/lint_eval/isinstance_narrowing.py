"""``isinstance`` narrowing: inside ``if isinstance(x, T):`` (and after ``if not
isinstance(x, T): raise``) an untyped ``x`` has the type ``T``."""
from __future__ import annotations

import io
import sqlite3

import httpx


async def narrowed(x, url: str) -> None:
    if isinstance(x, httpx.Client):
        x.get(url)  # error: ASYNC212
    else:
        x.get(url)  # not a Client here
    x.get(url)  # nor after the branch


async def narrowed_and(x, url: str) -> None:
    if isinstance(x, httpx.Client) and url:
        x.post(url)  # error: ASYNC212


async def early_exit(conn, url: str) -> None:
    if not isinstance(conn, sqlite3.Connection):
        raise TypeError("a sqlite3 connection")
    conn.execute("select 1")  # error: COB105


async def file_object(fh) -> None:
    if isinstance(fh, io.TextIOWrapper):
        fh.read()  # error: ASYNC230


async def not_narrowed(x, y, url: str) -> None:
    if isinstance(x, httpx.AsyncClient):
        await x.get(url)
    if isinstance(y, (httpx.Client, httpx.AsyncClient)):
        y.get(url)  # two types: none
    if isinstance(x, httpx.Client):
        x = make_other()
        x.get(url)  # rebound in the branch
    if isinstance(x, io.BytesIO):
        x.read()


def make_other() -> object:
    return object()
