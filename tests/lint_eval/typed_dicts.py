"""A TypedDict's fields are typed by its annotations: ``d["client"]`` and
``d.get("client")`` are the field's type (Optional stripped); another key, a plain dict, or
another class's ``get`` are what they were (the latter: what its ``get`` returns)."""

from typing import Optional, TypedDict

import requests


class Tree:
    def __init__(self) -> None:
        self.session = requests.Session()

    def patch(self) -> None:
        self.session.post("https://api.example.com/runs")


class Container(TypedDict, total=False):
    new_run: Optional[Tree]
    name: str


class Extra(Container):
    tags: list[str]


class Registry:
    def get(self, name: str) -> requests.Session:
        return requests.Session()


def _end(container: Container) -> None:
    run = container.get("new_run")
    if run is None:
        return
    run.patch()


async def wrapper(container: Container) -> None:
    _end(container)  # error: COB110
    container["new_run"].patch()  # error: COB110
    container["name"].upper()


async def inherited(extra: Extra) -> None:
    extra["new_run"].patch()  # error: COB110


async def plain(options: dict) -> None:
    options["new_run"].patch()


async def registry(reg: Registry) -> None:
    reg.get("default").get("https://example.com")  # error: COB101
