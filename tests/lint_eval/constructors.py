"""The constructor of a public class with async methods is taken as run on the loop (its
users build it in their coroutines: an application's async setup), at low confidence, a
dataclass's ``__post_init__`` too; a private class, a nested one, or a class with no async
method is not an async API."""

import dataclasses
import importlib.metadata
import ssl


def default_context() -> ssl.SSLContext:
    return ssl.create_default_context()


class Client:
    def __init__(self, host: str) -> None:  # error: COB110
        self.host = host
        self.ssl = default_context()

    async def fetch(self) -> bytes:
        return b""


class Meta:
    def __init__(self) -> None:  # error: COB110
        self.version = importlib.metadata.version("corevo-obs")

    async def close(self) -> None:
        return None


class _Private:
    def __init__(self) -> None:
        self.ssl = ssl.create_default_context()

    async def run(self) -> None:
        return None


class SyncOnly:
    def __init__(self) -> None:
        self.ssl = ssl.create_default_context()

    def run(self) -> None:
        return None


class Light:
    def __init__(self, host: str) -> None:
        self.host = host

    async def run(self) -> None:
        return None


@dataclasses.dataclass
class Printer:
    host: str

    def __post_init__(self) -> None:  # error: COB110
        self.agent = importlib.metadata.version("corevo-obs")

    async def status(self) -> str:
        return self.host


class Daemon:
    """A script's class: its __main__ block builds it in sync code before any loop runs,
    so its constructor is no async API's (the false twin of Client above)."""

    def __init__(self) -> None:
        self.ssl = ssl.create_default_context()

    async def serve(self) -> None:
        return None


class Reader:
    """Built by a sync main() that the __main__ block calls: a script's class too."""

    def __init__(self) -> None:
        self.ssl = ssl.create_default_context()

    async def read(self) -> None:
        return None


class Shared:
    """Built in __main__ and by a coroutine: the coroutine's call is a site of its own, and
    the guess stands."""

    def __init__(self) -> None:  # error: COB110 [low]
        self.ssl = ssl.create_default_context()

    async def run(self) -> None:
        return None


async def spawn() -> None:
    await Shared().run()  # error: COB110 [medium]


def main() -> None:
    Reader()


if __name__ == "__main__":
    Daemon()
    Shared()
    main()
