"""A class of the tree whose methods block, built in other modules."""
from __future__ import annotations

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
