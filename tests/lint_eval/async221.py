"""ASYNC221: running a process to completion inside async def (``subprocess.run`` and
friends, ``os.system``, ``os.posix_spawn*``, ``os.spawn*`` with ``P_WAIT``)."""
import os
import subprocess
from os import P_WAIT


async def runs(cmd: list[str], env: dict[str, str]) -> None:
    subprocess.run(cmd)  # error: ASYNC221
    subprocess.call(cmd)  # error: ASYNC221
    subprocess.check_call(cmd)  # error: ASYNC221
    subprocess.check_output(cmd)  # error: ASYNC221
    subprocess.getoutput("true")  # error: ASYNC221
    subprocess.getstatusoutput("true")  # error: ASYNC221
    os.system("true")  # error: ASYNC221
    os.posix_spawn("/bin/true", ["true"], env)  # error: ASYNC221
    os.posix_spawnp("true", ["true"], env)  # error: ASYNC221
    os.spawnl(os.P_WAIT, "/bin/true", "true")  # error: ASYNC221
    os.spawnle(P_WAIT, "/bin/true", "true", env)  # error: ASYNC221
    os.spawnlp(os.P_WAIT, "true", "true")  # error: ASYNC221
    os.spawnlpe(os.P_WAIT, "true", "true", env)  # error: ASYNC221
    os.spawnv(os.P_WAIT, "/bin/true", ["true"])  # error: ASYNC221
    os.spawnve(os.P_WAIT, "/bin/true", ["true"], env)  # error: ASYNC221
    os.spawnvp(os.P_WAIT, "true", ["true"])  # error: ASYNC221
    os.spawnvpe(os.P_WAIT, "true", ["true"], env)  # error: ASYNC221


async def offloaded(cmd: list[str]) -> None:
    import asyncio
    await asyncio.to_thread(subprocess.run, cmd)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, os.system, "true")
