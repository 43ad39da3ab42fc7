"""A class of the tree whose methods block, built in other modules."""
from __future__ import annotations

import functools
import io

import httpx


class Store:
    def put(self, data: bytes) -> None:
        with open("/tmp/store.bin", "wb") as fh:
            fh.write(data)

    def connect(self) -> httpx.Client:
        return httpx.Client()

    def cheap(self) -> int:
        return 1

    @classmethod
    def create(cls) -> Store:
        return cls()

    @property
    def client(self) -> httpx.Client:
        return httpx.Client()

    @property
    def buffer(self) -> io.BytesIO:
        return io.BytesIO()

    @functools.cached_property
    def log(self):
        return open("/tmp/store.log", "a")

    @property
    def reader(self) -> Store:
        return self

    @property
    def count(self) -> int:
        return 1

    def total(self) -> int:
        return 1

    def configured(self, **options: str):
        self.options = options
        return self

    async def mine(self, url: str) -> None:
        self.client.get(url)  # error: ASYNC212
        self.log.write("x")  # error: COB100
        self.buffer.read()
        self.reader.put(b"")  # error: COB110
