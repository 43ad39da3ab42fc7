"""Getters in a module without coroutines: read only once a chain leads here."""
from __future__ import annotations

import io


class Archive:
    def __init__(self, path: str) -> None:
        self.path = path

    @property
    def buffer(self) -> io.BytesIO:
        return io.BytesIO()

    @property
    def on_disk(self):
        return open(self.path, "rb")
