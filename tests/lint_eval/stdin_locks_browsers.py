"""Waiting on a terminal, another process's file lock, or a browser: ``sys.stdin``'s
readers (COB107), ``fcntl.flock`` / ``lockf`` without ``LOCK_NB`` (COB108), and
``webbrowser.open`` (COB103); the non-blocking forms are quiet."""

import fcntl
import sys
import webbrowser


async def read_command() -> str:
    return sys.stdin.readline()  # error: COB107


async def exclusive(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_EX)  # error: COB108
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    fcntl.lockf(fd, fcntl.LOCK_UN | fcntl.LOCK_NB)


async def login(url: str) -> None:
    webbrowser.open(url)  # error: COB103
