"""ASYNC222: waiting for a child process with ``os.wait*`` inside async def."""
import os
from os import waitpid


async def waits(pid: int) -> None:
    os.wait()  # error: ASYNC222
    os.wait3(0)  # error: ASYNC222
    os.wait4(pid, 0)  # error: ASYNC222
    os.waitid(os.P_PID, pid, os.WEXITED)  # error: ASYNC222
    os.waitpid(pid, 0)  # error: ASYNC222
    waitpid(pid, 0)  # error: ASYNC222


async def polls(pid: int) -> None:
    os.waitpid(pid, os.WNOHANG)  # returns at once (flake8-async reports it)
    os.wait3(os.WNOHANG)
