"""ASYNC240: ``os.path`` queries that touch the file system inside async def (and their
``pathlib`` counterparts). String-only helpers such as ``join`` and ``normpath`` do not."""
import os
import os.path
import os.path as osp
from os.path import exists, getsize
from pathlib import Path


async def queries(p: str, q: str, fd: int) -> None:
    os.path.exists(p)  # error: ASYNC240
    os.path.lexists(p)  # error: ASYNC240
    os.path.isfile(p)  # error: ASYNC240
    os.path.isdir(p)  # error: ASYNC240
    os.path.islink(p)  # error: ASYNC240
    os.path.ismount(p)  # error: ASYNC240
    os.path.realpath(p)  # error: ASYNC240
    os.path.getsize(p)  # error: ASYNC240
    os.path.getmtime(p)  # error: ASYNC240
    os.path.getatime(p)  # error: ASYNC240
    os.path.getctime(p)  # error: ASYNC240
    os.path.samefile(p, q)  # error: ASYNC240
    os.path.sameopenfile(fd, fd)  # descriptors, not paths: fstat, no lookup ([descriptors])
    osp.isdir(p)  # error: ASYNC240
    exists(p)  # error: ASYNC240
    getsize(p)  # error: ASYNC240


async def pathlib_queries(p: Path) -> None:
    p.exists()  # error: ASYNC240
    p.is_dir()  # error: ASYNC240
    p.resolve()  # error: ASYNC240
    Path("x").stat()  # error: ASYNC240


async def strings_only(p: str) -> None:
    os.path.join(p, "x")
    os.path.basename(p)
    os.path.dirname(p)
    os.path.splitext(p)
    os.path.normpath(p)  # flake8-async reports it: no file-system access
    Path(p).name
    Path(p).with_suffix(".txt")
