import os

from corevo_obs import blocking


def _write_blob(path: str, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)


def _stage(path: str, data: bytes) -> None:
    _write_blob(path + ".tmp", data)


def cached_read(path: str) -> bytes:
    with open(path, "rb") as fh:  # configured non-blocking in the corpus test
        return fh.read()


def pure(x: int) -> int:
    return ping(x) if x else 0


def ping(x: int) -> int:
    return pure(x - 1)  # a cycle with no blocking call: no evidence, no finding


@blocking
def upload(path: str) -> None:
    """Declared blocking: a vendor SDK the lint cannot see into."""


def publish(path: str) -> None:
    upload(path)


class BlobStore:
    # its users build it in coroutines (a class with async methods): low confidence
    def __init__(self, root: str) -> None:  # error: COB110
        os.makedirs(root, exist_ok=True)
        self.root = root

    def _path(self, key: str) -> str:
        return os.path.join(self.root, key)

    def put(self, key: str, data: bytes) -> None:
        _stage(self._path(key), data)

    async def aput(self, key: str, data: bytes) -> None:
        self.put(key, data)  # error: COB110
        self._path(key)
