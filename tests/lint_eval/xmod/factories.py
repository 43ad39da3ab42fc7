"""Helpers whose results type a receiver in another module: by a return annotation, by
what every ``return`` gives, or by another helper's result. No async code here."""
from __future__ import annotations

import functools
import io
import sqlite3
import subprocess
from typing import Optional

import httpx

from .store import Store


def make_client():
    return httpx.Client(timeout=3)


def make_annotated() -> httpx.Client:
    return build()


def build():
    return httpx.Client()


def via_helper():
    return make_client()


def maybe_client(flag: bool) -> Optional[httpx.Client]:
    return httpx.Client() if flag else None


def client_or_none(flag: bool):
    if not flag:
        return None
    client = httpx.Client()
    return client


@functools.cache
def cached_client():
    return httpx.Client()


def open_db(path: str) -> sqlite3.Connection:
    return sqlite3.connect(path)


def make_store():
    return Store()


def start(cmd: list[str]):
    return subprocess.Popen(cmd)


# results that are not a blocking object
def make_async():
    return httpx.AsyncClient(verify=False)  # no CA bundle loaded: its calls are the test


def make_buffer():
    return io.BytesIO()


def make_text() -> io.StringIO:
    return io.StringIO()


def open_archive(path: str):
    return open(path, "rb")


def either(flag: bool):
    if flag:
        return httpx.Client()
    return httpx.AsyncClient()


def client_gen():
    yield httpx.Client()


def wrapped(func):
    return func


@wrapped
def decorated():
    return httpx.Client()


def recursive():
    return recursive()
