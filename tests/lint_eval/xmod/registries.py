"""Classmethods that hand back the class they were called on (``-> Self``, ``return
cls(...)``, ``return self``), defined on a generic base: ``Sub.instance()`` is a ``Sub``
(``uploads.py`` calls them from coroutines in another module)."""

from __future__ import annotations

from pathlib import Path
from typing import Generic, Self, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    _instance: Registry[T] | None = None

    @classmethod
    def instance(cls) -> Self:
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance  # type: ignore[return-value]

    @classmethod
    def fresh(cls):  # type: ignore[no-untyped-def]
        return cls()

    def tagged(self, tag: str):  # type: ignore[no-untyped-def]
        self.tag = tag
        return self

    def store(self, text: str) -> None:
        self.last = text  # the base keeps it in memory


class FileRegistry(Registry[str]):
    def store(self, text: str) -> None:
        Path("registry.txt").write_text(text)
