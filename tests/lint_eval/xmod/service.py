"""Calls on objects that helpers of other modules build (ASYNC212 and chains)."""
from __future__ import annotations

import zipfile

import httpx

from . import Middle, client_factory, factories
from .archive import Archive
from .bases import Session
from .factories import (
    cached_client,
    client_gen,
    client_or_none,
    decorated,
    either,
    make_annotated,
    make_async,
    make_buffer,
    make_client,
    make_store,
    make_text,
    open_archive,
    maybe_client,
    open_db,
    recursive,
    start,
    via_helper,
)
from .store import Store


async def results_of_helpers(url: str, data: bytes) -> None:
    client = make_client()
    client.get(url)  # error: ASYNC212
    make_annotated().post(url)  # error: ASYNC212
    factories.make_client().put(url)  # error: ASYNC212
    via_helper().get(url)  # error: ASYNC212
    client_factory().get(url)  # error: ASYNC212
    maybe_client(True).get(url)  # error: ASYNC212
    client_or_none(True).get(url)  # error: ASYNC212
    cached_client().get(url)  # error: ASYNC212
    with make_client() as wc:
        wc.delete(url)  # error: ASYNC212
    db = open_db("x.db")  # error: COB110
    db.execute("select 1")  # error: COB105
    store = make_store()
    store.put(data)  # error: COB110
    store.connect().get(url)  # error: ASYNC212
    Store.create().put(data)  # error: COB110
    proc = start(["ls"])  # error: COB110
    proc.wait()  # error: ASYNC222


async def already_reaped() -> None:
    proc = start(["ls"])  # error: COB110
    proc.communicate()  # error: ASYNC222
    proc.wait()  # reaped by communicate


async def not_blocking(url: str) -> None:
    ac = make_async()
    await ac.get(url)
    buf = make_buffer()
    buf.read()
    zipfile.ZipFile(make_buffer())
    zipfile.ZipFile(make_text())
    make_text().write("x")
    either(True).get(url)  # two types: none
    for c in client_gen():
        c.get(url)  # a generator's items are not typed
    decorated().get(url)  # a decorator may change the result
    recursive().get(url)
    make_store().cheap()


class Service:
    def __init__(self) -> None:
        self.store = Store()
        self.made = make_store()
        self.client = make_client()
        self.async_client = make_async()

    async def handle(self, url: str, data: bytes) -> None:
        self.store.put(data)  # error: COB110
        self.made.put(data)  # error: COB110
        self.client.get(url)  # error: ASYNC212
        await self.async_client.get(url)


def sync_helper(url: str) -> None:
    client = make_client()
    client.get(url)


def sync_store(data: bytes) -> None:
    make_store().put(data)


def sync_quiet(url: str) -> None:
    ac = make_async()
    ac.get(url)


def zip_in_memory() -> list[str]:
    with zipfile.ZipFile(make_buffer()) as z:  # the buffer: made in another module
        return z.namelist()


def zip_on_disk(path: str) -> list[str]:
    with zipfile.ZipFile(open_archive(path)) as z:  # a real file, made in another module
        return z.namelist()


async def through_sync_helpers(url: str, data: bytes) -> None:
    sync_helper(url)  # error: COB110
    sync_store(data)  # error: COB110
    sync_quiet(url)
    zip_in_memory()
    zip_on_disk(url)  # error: COB110


async def typed_locally(c: httpx.Client) -> None:
    c.get("u")  # error: ASYNC212


async def through_properties(store: Store, url: str) -> None:
    store.client.get(url)  # error: ASYNC212
    store.log.write("x")  # error: COB100
    store.reader.put(b"")  # error: COB110
    store.buffer.read()
    zipfile.ZipFile(store.buffer)
    buf = store.buffer
    zipfile.ZipFile(buf)
    made = make_store()
    made.client.get(url)  # error: ASYNC212
    store.count.bit_length()
    ref = store.total  # a bound method, not a property: its result is not its value
    ref.bit_length()
    store.configured(mode="x").put(b"")  # error: COB110
    store.configured().cheap()


def zip_property(store: Store) -> list[str]:
    with zipfile.ZipFile(store.buffer) as z:
        return z.namelist()


async def through_a_helper_on_a_property(store: Store) -> None:
    zip_property(store)


def zip_getter(archive: Archive) -> list[str]:
    with zipfile.ZipFile(archive.buffer) as z:
        return z.namelist()


def zip_getter_on_disk(archive: Archive) -> list[str]:
    with zipfile.ZipFile(archive.on_disk) as z:
        return z.namelist()


async def through_getters_of_a_module_without_coroutines(archive: Archive) -> None:
    zip_getter(archive)
    zip_getter_on_disk(archive)  # error: COB110


class Local(Middle):  # its base named through the package's re-export
    async def run(self, data: bytes, url: str) -> None:
        self.save(data)  # error: COB110
        self.cheap()
        self.handle.read()  # error: COB100
        self.missing()
        self.get(url)  # not a client: Middle is no httpx.Client
        self.client.get(url)  # error: ASYNC212
        self.swapped.get(url)

    def sync_save(self, data: bytes) -> None:
        self.save(data)


class Client(Session):
    async def fetch(self, url: str) -> None:
        self.get(url)  # error: ASYNC212


async def through_bases(url: str, data: bytes, local: Local) -> None:
    Local("p").save(data)  # error: COB110
    local.sync_save(data)  # error: COB110
    local.cheap()
    Session().get(url)  # error: ASYNC212
    local.client.get(url)  # error: ASYNC212
    local.swapped.get(url)
    local.swapped = None  # written from outside the class


class Overriding(Middle):
    async def save(self, data: bytes) -> None:  # hides the base's blocking save
        pass

    handle = None

    async def run(self, data: bytes) -> None:
        await self.save(data)
        self.cheap()
        super().save(data)  # error: COB110
        super().cheap()


class Client2(Session):
    async def fetch(self, url: str) -> None:
        super().get(url)  # error: ASYNC212


async def through_an_override(o: Overriding, data: bytes) -> None:
    await o.save(data)
