"""Code a test suite skips, and code that runs once per process: a clause the project
excludes from coverage is read like any other code: an ``except``, ``if`` or ``else``
clause marked ``# pragma: no cover`` is a defensive fallback whose findings are low (it
may run on another platform: a guess), a ``def`` marked so is live code nobody tests
(its findings keep their tier); a call under ``if <module global> is None:`` fills a
process-wide memo, so a chain through it is low confidence (first use)."""

import os
import socket
import ssl
import time

_default_context = None


def seed() -> bytes:
    try:
        return os.urandom(16)
    except NotImplementedError:  # pragma: no cover
        with open("/dev/urandom", "rb") as fh:
            return fh.read(16)


def address(host: str) -> object:
    if hasattr(socket, "if_nametoindex"):
        return host
    else:  # pragma: no cover
        return socket.getaddrinfo(host, 0)


def legacy() -> None:  # pragma: no cover
    time.sleep(1)


def reset_context() -> None:
    global _default_context
    _default_context = ssl.create_default_context()


def default_context() -> ssl.SSLContext:
    if _default_context is None:
        reset_context()
    assert _default_context is not None
    return _default_context


def fresh_context() -> ssl.SSLContext:
    return ssl.create_default_context()


async def connect(host: str) -> None:
    seed()  # error: COB110 [low]
    address(host)  # error: COB110 [low]
    legacy()  # error: COB110 [medium]
    default_context()  # error: COB110
    fresh_context()  # error: COB110
    if os.name == "nt":  # pragma: no cover
        time.sleep(1)  # error: COB104 [low]
    else:
        time.sleep(0.1)  # error: COB104


async def live_handler(request: object) -> bytes:  # pragma: no cover
    with open("/srv/index.html", "rb") as fh:  # error: COB100 [high]
        return fh.read()  # error: COB100


class Settings:
    """A singleton: ``instance()`` builds it once per process (the first call reads the
    file, every later one returns the memo), as a module global memo does."""

    _instance: "Settings | None" = None

    def __init__(self) -> None:
        self.values = os.listdir("/etc/app")

    @staticmethod
    def instance() -> "Settings":
        if not hasattr(Settings, "_instance") or Settings._instance is None:
            Settings._instance = Settings()
        return Settings._instance

    @classmethod
    def shared(cls) -> "Settings":
        if cls._instance is None:
            cls._instance = Settings()
        return cls._instance


async def settings_route() -> list[str]:
    Settings.shared()  # error: COB110 [low]
    Settings()  # error: COB110 [medium]
    return Settings.instance().values  # error: COB110 [low]
