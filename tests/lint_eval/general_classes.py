"""Issue 25's classes as general rules: C3 method order, descriptors are not paths,
readiness waits, lazy client constructors, first-use loaders up a helper chain."""

import importlib
import os
import select
import socket

import pymongo


class Base:
    def save(self) -> None:
        os.listdir(".")


class Left(Base):
    pass


class Right(Base):
    async def save(self) -> None:  # an async override: awaited, never the sync base's
        pass


class Both(Left, Right):  # C3: Both, Left, Right, Base: Right.save wins over Base.save
    pass


class Plain(Left):  # Plain, Left, Base: Base.save runs
    pass


async def diamond() -> None:
    await Both().save()
    Plain().save()  # error: COB110


async def descriptors(sock: socket.socket, path: str) -> None:
    with open(0, closefd=False) as stdin_again:  # fd 0: no path resolved
        del stdin_again
    open(sock.fileno(), "rb", closefd=False)
    fd = os.dup(sock.fileno())
    open(fd, "rb")
    os.path.sameopenfile(fd, 1)
    os.stat(fd)
    os.stat(path)  # error: COB100
    open(path)  # error: COB100


async def pipes(payload: bytes) -> None:
    r, w = os.pipe()
    os.write(w, payload)  # a fresh pipe buffers the write
    os.read(r, 1)  # error: COB100
    os.write(3, payload)  # error: COB100


async def readiness(sock: socket.socket) -> None:
    select.select([sock], [], [], 0)
    select.select([sock], [], [], 5)  # error: COB102
    poller = select.poll()
    poller.poll(0)
    poller.poll(1000)  # error: COB102


async def lazy_clients(url: str) -> None:
    client = pymongo.MongoClient(url)  # connects in background threads
    client.server_info()  # error: COB105


def load_plugin(name: str) -> object:
    return importlib.import_module(f"plugins.{name}")


async def plugins(name: str) -> None:
    load_plugin(name)  # error: COB110
    importlib.import_module(name)  # error: COB100


def register(job: object) -> object:
    if isinstance(job, str):  # a dotted path: imported
        return importlib.import_module(job)
    return job


async def jobs() -> None:
    async def local_job() -> None:
        pass

    register(local_job)  # a function object is no str: the import never runs
    register("pkg.jobs")  # error: COB110
