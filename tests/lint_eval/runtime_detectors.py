"""Calls the runtime detectors (Home Assistant's block_async_io, blockbuster) catch and the
peers' static rules do not: listings, walks, globs, temp dirs, pathlib queries, imports and
data files loaded on first use, SSL certificate loading, parsers that read a file."""
import importlib
import importlib.metadata
import mimetypes
import os
import shutil
import ssl
import tempfile
import xml.etree.ElementTree as ET
import zoneinfo
from pathlib import Path


async def listings(p: str, d: Path) -> None:
    os.listdir(p)  # error: COB100
    os.scandir(p)  # error: COB100
    os.walk(p)  # error: COB100
    d.iterdir()  # error: COB100
    d.glob("*.py")  # error: COB100
    d.rglob("*.py")  # error: COB100
    d.is_symlink()  # error: COB100
    d.absolute()  # os.getcwd() at most: no file-system walk
    d.expanduser().read_text()  # error: COB100
    os.access(p, os.R_OK)  # error: COB100
    shutil.which("git")  # error: COB100
    shutil.disk_usage(p)  # error: COB100


async def temporaries() -> None:
    tempfile.mkdtemp()  # error: COB100
    tempfile.TemporaryDirectory()  # error: COB100
    tempfile.gettempdir()  # error: COB100
    tempfile.NamedTemporaryFile()  # error: COB100


async def first_use(name: str) -> None:
    importlib.import_module(name)  # error: COB100
    importlib.metadata.version("corevo-obs")  # error: COB100
    zoneinfo.ZoneInfo("Europe/Paris")  # error: COB100
    mimetypes.guess_type("a.txt")  # error: COB100


async def certificates(ca: str) -> None:
    ctx = ssl.create_default_context()  # error: COB100
    ctx.load_verify_locations(ca)  # error: COB100
    ctx.load_cert_chain("cert.pem", "key.pem")  # error: COB100
    own = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    own.load_default_certs()  # error: COB100
    own.check_hostname = True


async def parsers(p: str) -> None:
    ET.parse(p)  # error: COB100
    ET.fromstring("<a/>")  # parses a string in memory


def backend(name: str):  # the usual shape: a cache in front of the import
    import sys
    module = sys.modules.get(name)
    return module if module is not None else importlib.import_module(name)


async def cached_first_use(name: str) -> None:
    backend(name)  # error: COB110 (low confidence: import_module blocks on first use only)
