"""``Path.glob`` / ``rglob`` only make a generator: the directory is read as it is
iterated, so a call whose result is only stored does not block (iterating it later does,
on the loop or not). Iterated or consumed where it is called, it blocks there.
``iterdir`` lists the directory when called (Python 3.13 on), stored or not."""

from collections.abc import Iterator
from pathlib import Path


class Lister:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.entries = None

    async def start(self) -> None:
        self.entries = self.root.glob("*")

    async def deep(self) -> None:
        pending = self.root.rglob("*.py")
        self.entries = pending

    async def annotated(self) -> None:
        self.entries: Iterator[Path] = self.root.glob("*.txt")

    async def loop(self) -> list[Path]:
        return [p for p in self.root.glob("*")]  # error: ASYNC240

    async def consumed(self) -> list[Path]:
        return sorted(self.root.rglob("*.py"))  # error: COB100 [high]

    async def listed(self) -> None:
        self.entries = self.root.iterdir()  # error: COB100 [high]
