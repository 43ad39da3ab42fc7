"""Calls that look blocking and are not: in-memory file objects and databases, the standard
streams, lazy constructors, a process already reaped by communicate(), and their blocking
twins."""
import asyncio
import io
import json
import pickle
import sqlite3
import subprocess
import sys
import tarfile
import zipfile

import redis


async def in_memory(data: bytes, buf: io.BytesIO) -> None:
    zipfile.ZipFile(io.BytesIO(data))
    zipfile.ZipFile(file=buf)
    tarfile.open(fileobj=io.BytesIO(data))
    tarfile.open(mode="r:gz", fileobj=buf)
    json.load(io.StringIO("{}"))
    text = io.StringIO()
    json.dump({}, text)
    sqlite3.connect(":memory:")  # a private database in memory: no file
    sqlite3.connect(database=":memory:", check_same_thread=False)


async def to_the_console(config: dict[str, object]) -> None:
    json.dump(config, sys.stdout, indent=2)  # console output, like print(): no disk file
    pickle.dump(config, sys.stdout.buffer)
    json.dump(config, sys.stderr)


async def on_disk(path: str) -> None:
    zipfile.ZipFile(path)  # error: COB100
    tarfile.open(path)  # error: COB100
    sqlite3.connect(path)  # error: COB105
    sqlite3.connect("memory.db")  # error: COB105
    with open(path) as fh:  # error: COB100
        json.load(fh)  # error: COB100
    with open(path, "wb") as out:  # error: COB100
        pickle.dump({}, out)  # error: COB100


async def lazy_clients(url: str) -> None:
    client = redis.Redis.from_url(url)
    redis.from_url(url)
    redis.Redis(host="localhost")
    client.get("k")  # error: COB106


async def reaped(cmd: list[str]) -> None:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE)  # error: COB103
    out, _ = await asyncio.to_thread(proc.communicate)
    proc.wait()
    other = subprocess.Popen(cmd)  # error: COB103
    other.wait()  # error: COB103
