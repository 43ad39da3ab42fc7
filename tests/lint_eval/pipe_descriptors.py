# Pipe descriptors: a file object wrapped around an os.pipe() end does no disk I/O; whether
# it waits depends on the other end (a guess), so it is medium, never high. Real paths,
# and descriptors the function did not make, stay high.
import os


async def pipe_files(path: str, payload: bytes) -> None:
    r, w = os.pipe()
    writer = open(w, "wb")  # a descriptor: no path resolved
    writer.write(payload)  # error: COB100 [medium]
    writer.close()  # error: COB100 [medium]
    assert open(r).read()  # error: COB100 [medium]
    disk = open(path, "wb")  # error: COB100 [high]
    disk.write(payload)  # error: COB100 [high]
    disk.close()  # error: COB100 [high]


async def pipe_rebound(payload: bytes) -> None:
    stdout_r, stdout_w = os.pipe()
    fd = stdout_r
    os.read(fd, 2)  # error: COB100 [medium]
    with os.fdopen(stdout_w, "wb") as out:  # error: COB100 [medium]
        out.write(payload)  # error: COB100 [medium]
    os.read(stdout_r, 4)  # error: COB100 [medium]


async def not_a_pipe(fd: int, path: str) -> None:
    os.read(fd, 2)  # error: COB100 [high]
    with os.fdopen(fd, "rb") as handle:  # error: COB100 [high]
        handle.read()  # error: COB100 [high]
    r, w = os.pipe()
    r = os.open(path, os.O_RDONLY)  # error: COB100 [high]
    os.read(r, 2)  # error: COB100 [high]
    os.close(w)
