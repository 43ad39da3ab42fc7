"""Argument-sensitive chains: a helper's blocking path guarded by a test of its parameter
is not inherited by a call whose constant or default arguments rule it out; an unknown
argument keeps every path."""
import os
from pathlib import Path

REPORT_PATH = "report"
CACHE = "cache"
MODES = ("disk", "mmap")


def default(key: str) -> str:
    if key == REPORT_PATH:
        return Path("/var/report").read_text()
    return key.upper()


def early_exit(key: str) -> str:
    if key != REPORT_PATH:
        return key
    return open("/var/report").read()


def by_membership(mode: str) -> None:
    if mode in MODES:
        os.listdir(".")


def by_flag(data: bytes, *, sync: bool = False) -> None:
    if sync:
        os.fsync(3)


class Request:
    def __init__(self, url: str, trust_env: bool = False) -> None:
        self.url = url
        if trust_env:
            self._netrc = Path("~/.netrc").expanduser().read_text()


def maybe_dir(path: str | None = None) -> None:
    if path is not None:
        os.makedirs(path)


def forwards(key: str) -> str:
    return default(key)


class Session:
    def __init__(self) -> None:
        self.open = True


class Client:
    def __init__(self, token: str, session: Session | None = None, **options: object) -> None:
        if session is None:
            self.session = Path("~/.netrc").expanduser().read_text()


class MockedClient(Client):
    def __init__(self, **options: object) -> None:
        # session is named, so it is not None whatever else the mapping holds
        super().__init__("t", session=Session(), **options)


def otherwise(kind: str) -> None:
    if kind == "memory":
        return None
    else:
        os.remove(kind)


async def ruled_out(key: str) -> None:
    default(CACHE)
    default("other")
    early_exit("plain")
    by_membership("net")
    by_flag(b"x")
    by_flag(b"x", sync=False)
    Request("https://example.org")
    Request("https://example.org", trust_env=False)
    maybe_dir()
    forwards(CACHE)
    otherwise("memory")
    MockedClient(timeout=3)
    Client("t", session=Session(), **{"timeout": 3})
    by_flag(b"x", sync=False, **{"other": 1})  # sync is named: the mapping cannot hold it


async def kept(key: str, flag: bool) -> None:
    default(REPORT_PATH)  # error: COB110
    default(key)  # error: COB110
    early_exit(REPORT_PATH)  # error: COB110
    by_membership("disk")  # error: COB110
    by_flag(b"x", sync=True)  # error: COB110
    by_flag(b"x", sync=flag)  # error: COB110
    Request("https://example.org", trust_env=True)  # error: COB110
    Request("https://example.org", True)  # error: COB110
    maybe_dir("/tmp/x")  # error: COB110
    forwards(REPORT_PATH)  # error: COB110
    forwards(key)  # error: COB110
    otherwise("disk")  # error: COB110
    opts = {"sync": True}
    by_flag(b"x", **opts)  # error: COB110
    Client("t", **opts)  # error: COB110
