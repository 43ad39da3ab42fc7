"""ASYNC220: starting a process without waiting for it (``subprocess.Popen``,
``os.popen``, ``os.spawn*`` with a mode other than ``P_WAIT``) inside async def."""
import os
import subprocess
from subprocess import Popen


async def starts(cmd: list[str]) -> None:
    subprocess.Popen(cmd)  # error: ASYNC220
    Popen(cmd)  # error: ASYNC220
    os.popen("true")  # error: ASYNC220
    os.spawnl(os.P_NOWAIT, "/bin/true", "true")  # error: ASYNC220
    os.spawnv(os.P_NOWAIT, "/bin/true", ["true"])  # error: ASYNC220
    os.spawnlp(mode=os.P_NOWAIT, file="true", args=["true"])  # error: ASYNC220


async def the_asyncio_way(cmd: list[str]) -> None:
    import asyncio
    proc = await asyncio.create_subprocess_exec(*cmd)
    await proc.wait()
