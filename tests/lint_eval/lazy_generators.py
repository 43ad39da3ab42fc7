"""``Path.glob`` / ``rglob`` only make a generator: the directory is read as it is
iterated, so a call whose result is only stored does not block (iterating it later does,
on the loop or not). Iterated or consumed where it is called, it blocks there.
``iterdir`` lists the directory when called (Python 3.13 on), stored or not. The same
holds for a generator function of the file: its call runs none of its body; iterated there,
the chain blocks; handed to another callable, where that iterates it is a guess (low)."""

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


def read_lines(path: str) -> Iterator[str]:
    """A generator function: calling it opens nothing; iterating it does."""
    with open(path) as fh:
        yield from fh


async def plan_made(path: str) -> Iterator[str]:
    lines = read_lines(path)
    read_lines(path)
    return lines


async def plan_returned(path: str) -> Iterator[str]:
    return read_lines(path)


async def plan_iterated(path: str) -> list[str]:
    for line in read_lines(path):  # error: COB110 [medium]
        print(line)
    return list(read_lines(path))  # error: COB110 [medium]


async def plan_handed(run: object, path: str) -> None:
    run(read_lines(path))  # error: COB110 [low]
