import asyncio
import functools
import os
import pathlib as pl
import shutil
from os import path as osp
from pathlib import Path

import aiofiles


async def positives(p: str, d: Path) -> None:
    open(p)  # error: COB100
    with open(p) as fh:  # error: COB100
        fh.read()  # error: COB100
    late = await asyncio.to_thread(open, p)  # the open is offloaded, the reads are not
    late.readline()  # error: COB100
    os.listdir(p)  # error: COB100
    osp.exists(p)  # error: COB100
    shutil.rmtree(p)  # error: COB100
    Path(p).read_text()  # error: COB100
    pl.Path(p).write_bytes(b"")  # error: COB100
    d.iterdir()  # error: COB100
    (d / "x").exists()  # error: COB100
    here = Path.cwd()
    here.glob("*.py")  # error: COB100
    osp.realpath(p)  # error: COB100
    os.path.islink(p)  # error: COB100


async def negatives(p: str, d: Path) -> None:
    await asyncio.to_thread(open, p)
    await asyncio.to_thread(lambda: open(p).read())
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, functools.partial(shutil.rmtree, p))
    await loop.run_in_executor(None, lambda: os.listdir(p))
    async with aiofiles.open(p) as fh:
        await fh.read()
    d.name
    d.with_suffix(".txt")
    str(d / "y")
    os.path.normpath(p)  # string work only: no file system access
    os.path.expanduser(p)
    os.path.join(p, "x")


async def shadowed(open, os) -> None:  # noqa: A002 - parameters shadow the builtin/module
    open("x")
    os.listdir(".")


def sync_is_fine(p: str) -> str:
    with open(p) as fh:
        return fh.read()
