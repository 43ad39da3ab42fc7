"""What a name's annotation declares, statement by statement; awaited namesakes; the
methods of a sync file object or a urllib3 pool."""

import io
import os
import random
from io import TextIOWrapper

import urllib3


def make() -> object:
    return object()


async def declared_type_holds(f: TextIOWrapper) -> None:
    f = make()  # a plain assignment keeps the declared type, as a type checker reads it
    f.read()  # error: COB100


async def redeclared(f: TextIOWrapper) -> None:
    f.read()  # error: COB100
    f: int = 7
    f.read()
    f: TextIOWrapper = make()
    f.readline()  # error: COB100


async def redeclared_in_a_branch(f: TextIOWrapper) -> None:
    if random.random() < 0.5:
        f: int = 7
        f.read()
    f.read()  # int or file: unknown, not flagged


async def redeclared_in_a_loop(f: TextIOWrapper) -> None:
    for _ in range(3):
        f.read()  # the second turn sees the int
        f: int = 7


async def redeclared_in_a_try(f: TextIOWrapper) -> None:
    try:
        f: int = 7
        f.read()
        f: TextIOWrapper = make()
        f.read()  # error: COB100
    except ValueError:
        f.read()  # the handler may start before either annotation: unknown
    f.read()


async def unbound_optional(client: "Optional[io.TextIOWrapper]") -> None:  # noqa: F821
    client.write("x")  # error: COB100


async def awaited_namesake() -> None:
    await open("x")  # an awaited call is an async namesake the lint cannot see
    await os.path.isfile("x")


async def file_methods(f: io.BufferedReader) -> None:
    f.peek(1)  # error: COB100
    f.fileno()
    f.seek(0)
    f.readable()


async def pools(pool: urllib3.connectionpool.HTTPConnectionPool,
                manager: urllib3.poolmanager.PoolManager) -> None:
    pool.urlopen("GET", "/")  # error: COB101
    manager.request_encode_body("POST", "http://x")  # error: COB101
    manager.clear()
    manager.connection_from_url("http://x")


async def fs_checks(p: str) -> None:
    os.path.isjunction(p)  # error: COB100
