import asyncio
import os
import subprocess
from subprocess import check_output as co


async def positives() -> None:
    subprocess.run(["true"])  # error: COB103
    co(["true"])  # error: COB103
    os.system("true")  # error: COB103
    os.popen("true")  # error: COB103
    os.waitpid(1, 0)  # error: COB103
    proc = subprocess.Popen(["true"])  # error: COB103
    proc.wait()  # error: COB103


async def negatives() -> None:
    proc = await asyncio.create_subprocess_exec("true", stdout=subprocess.DEVNULL)
    await proc.wait()
    await asyncio.to_thread(subprocess.run, ["true"])
    os.waitpid(-1, os.WNOHANG)  # WNOHANG: returns at once, reaps a child if one exited
    os.wait4(-1, os.WUNTRACED | os.WNOHANG)
