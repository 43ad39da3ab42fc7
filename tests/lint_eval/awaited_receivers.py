"""A receiver whose methods the same coroutine awaits is an async object at run time,
whatever its annotation says (``conn: redis.Redis`` given the asyncio client): its other
calls are not the sync client's. Importing a module the file already imports, or asyncio
itself, on the loop is a lookup in ``sys.modules``; a module not imported yet is read from
disk."""

import importlib
import json

import redis


async def create_index(conn: redis.Redis, name: str, schema: str) -> None:
    conn.ft(name)
    await conn.execute_command(f"ft.create {name} {schema}")


async def drop_index(conn: redis.Redis, name: str) -> None:
    await conn.ft(name).dropindex()
    conn.delete(name)


async def forget(conn: redis.Redis, name: str) -> None:
    conn.delete(name)  # error: COB106


async def codecs(kind: str) -> object:
    __import__("asyncio")
    importlib.import_module("json")
    importlib.import_module(kind)  # error: COB100 [medium]
    return importlib.import_module("yaml"), json  # error: COB100 [medium]
