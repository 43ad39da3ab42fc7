import asyncio
import sys

from . import store
from .store import BlobStore, _write_blob, cached_read, publish, upload

if sys.platform == "win32":
    def helper() -> None:
        open("x")
else:
    def helper() -> None:
        pass


async def persist_artifact(path: str, data: bytes) -> None:
    _write_blob(path, data)  # error: COB110
    store._stage(path, data)  # error: COB110
    BlobStore("/tmp/x")  # error: COB110
    upload(path)  # error: COB111
    publish(path)  # error: COB110
    store.pure(3)
    cached_read(path)
    helper()  # two definitions: ambiguous, no finding
    await asyncio.to_thread(_write_blob, path, data)
    await asyncio.to_thread(BlobStore("/tmp/y").put, "k", data)  # error: COB110


async def configured(path: str) -> None:
    import legacy_sdk

    legacy_sdk.transfer(path)  # error: COB111
    legacy_sdk.ping()


async def typed_instance(path: str) -> None:
    blobs = BlobStore("/tmp/z")  # error: COB110
    blobs.put("k", b"")  # error: COB110
    blobs._path("k")


async def through_sync_only_modules(path: str) -> bytes:
    from .blobio import read_all

    return read_all(path)  # error: COB110


async def via_package_reexport(path: str) -> None:
    from . import publish_blob

    publish_blob(path)  # error: COB110
