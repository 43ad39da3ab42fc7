"""The calls Python makes for the code: ``obj[k]`` runs ``type(obj).__getitem__`` and
``len(obj)`` its ``__len__``. A project class whose item or length reads the disk blocks
where the subscript is (a lazy dataset read from an ``async def``); one that keeps its
items in memory does not, nor does a dict, a list or a class without the method."""

import json
from pathlib import Path


class LazyDataset:
    def __init__(self, root: str) -> None:
        self.root = root

    def __getitem__(self, index: int) -> object:
        return json.loads(Path(self.root, f"{index}.json").read_text())

    def __len__(self) -> int:
        return sum(1 for _ in Path(self.root).iterdir())


class InMemory:
    def __init__(self) -> None:
        self.items = [1, 2, 3]

    def __getitem__(self, index: int) -> int:
        return self.items[index]

    def __len__(self) -> int:
        return len(self.items)


class Plain:
    items = [1]


class Evaluation:
    def __init__(self, data: LazyDataset, cache: InMemory) -> None:
        self.data = data
        self.cache = cache

    async def run(self) -> None:
        for i in range(len(self.data)):  # error: COB110 [medium]
            print(self.data[i])  # error: COB110 [medium]

    async def cached(self) -> None:
        print(self.cache[0], len(self.cache))


async def first_item(root: str) -> object:
    data = LazyDataset(root)
    return data[0]  # error: COB110 [medium]


async def plain_values(plain: Plain) -> int:
    table = {"a": 1}
    rows = [1, 2]
    return table["a"] + rows[0] + len(rows) + plain.items[0]
