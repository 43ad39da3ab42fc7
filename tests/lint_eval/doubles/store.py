"""Library code calling abstract methods: the implementation a call runs is guessed among
the project's subclasses, but never a test double (a subclass in a test module) nor a
class defined inside a function body: library code does not run those on the loop. A
library subclass that blocks is still followed (``lookup``)."""

import time
from abc import ABC, abstractmethod


class Store(ABC):
    @abstractmethod
    def load(self) -> bytes:
        """The stored bytes."""


class MemoryStore(Store):
    def load(self) -> bytes:
        return b""


def slow_store() -> Store:
    class SlowStore(Store):
        def load(self) -> bytes:
            time.sleep(0.5)
            return b""

    return SlowStore()


async def read(store: Store) -> bytes:
    return store.load()


class Cache(ABC):
    @abstractmethod
    def get(self) -> bytes:
        """The cached bytes."""


class FileCache(Cache):
    def get(self) -> bytes:
        with open("/var/cache/app.bin", "rb") as fh:
            return fh.read()


async def lookup(cache: Cache) -> bytes:
    return cache.get()  # error: COB110 [medium]
