"""A package's data files are read from disk on every call: ``importlib.resources``
(the functions and a ``files()`` traversable's readers), ``pkgutil.get_data``."""

import importlib.resources
import pkgutil
from importlib.resources import files


async def schema() -> str:
    return files("mypkg").joinpath("schema.json").read_text()  # error: COB100


async def legacy() -> str:
    return importlib.resources.read_text("mypkg", "schema.json")  # error: COB100


async def raw() -> bytes | None:
    return pkgutil.get_data("mypkg", "schema.json")  # error: COB100


def load_schema() -> bytes:
    return (files("mypkg") / "schema.json").read_bytes()


async def validate() -> bytes:
    return load_schema()  # error: COB110


async def where() -> str:
    return str(files("mypkg"))  # names the folder, reads nothing
