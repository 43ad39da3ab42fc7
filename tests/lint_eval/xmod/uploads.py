"""Coroutines reaching a subclass through its base's ``Self``-returning classmethods
(``registries.py``): the instance is of the class the call names."""

from .registries import FileRegistry, Registry


async def upload_singleton(text: str) -> None:
    FileRegistry.instance().store(text)  # error: COB110 [medium]


async def upload_fresh(text: str) -> None:
    registry = FileRegistry.fresh()
    registry.store(text)  # error: COB110 [medium]


async def upload_tagged(text: str) -> None:
    FileRegistry.fresh().tagged("t").store(text)  # error: COB110 [medium]


class Uploader:
    def __init__(self) -> None:
        self._registry = FileRegistry.instance()
        self._memory = Registry.instance()

    async def upload(self, text: str) -> None:
        self._registry.store(text)  # error: COB110 [medium]

    async def remember(self, text: str) -> None:
        self._memory.store(text)  # the base's store keeps it in memory


async def remember_fresh(text: str) -> None:
    Registry.fresh().tagged("t").store(text)
