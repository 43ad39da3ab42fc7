"""Base classes in a module without coroutines: read once a subclass's call leads here."""
from __future__ import annotations

import httpx


class BaseStore:
    def __init__(self, path: str) -> None:
        self.path = path
        self.client = httpx.Client()
        self.swapped = httpx.Client()  # replaced from outside (service.py): no known type

    def save(self, data: bytes) -> None:
        with open(self.path, "wb") as fh:
            fh.write(data)

    def cheap(self) -> int:
        return 1

    @property
    def handle(self):
        return open(self.path, "rb")


class Middle(BaseStore):
    pass


class Session(httpx.Client):
    pass
