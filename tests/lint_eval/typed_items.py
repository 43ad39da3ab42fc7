"""Types the lint carries through attributes, items and unions: ``path.parent`` is a
path, the items of ``Path.glob`` / ``rglob`` / ``iterdir`` are paths (a module-level
path's too), ``for tool in self.tools`` over a ``Tuple[Tool, ...]`` field gives a Tool, a
name bound to None and then to a file is a file, and a field typed ``str | Path | None``
is a Path where a method only Path has is called on it. The false twins: a method the
scalars share (``str.replace``), items of an untyped list, an in-memory buffer bound after
None, the same calls offloaded."""

import asyncio
import io
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple, Union

ROOT = Path(__file__).parent
TEMPLATES = ROOT / "templates"


async def save(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)  # error: COB100
    await asyncio.to_thread(path.write_bytes, data)


async def templates() -> dict[str, str]:
    return {p.name: p.read_text()  # error: COB100
            for p in TEMPLATES.glob("*.html")}  # error: COB100


async def sources(base: Path) -> int:
    total = 0
    for f in sorted(base.rglob("*.py")):  # error: COB100
        total += f.stat().st_size  # error: COB100
    return total


async def names_only(base: Path) -> list[str]:
    found = await asyncio.to_thread(lambda: list(base.iterdir()))
    return [p.name for p in found]


class Tool:
    def __init__(self, name: str) -> None:
        self.name = name

    def version(self) -> str:
        done = subprocess.run([self.name, "--version"], capture_output=True, check=False)
        return done.stdout.decode()


@dataclass
class Toolbox:
    tools: Tuple[Tool, ...] = ()
    spare: Optional[List[Tool]] = None
    names: Tuple[str, ...] = ()

    async def versions(self) -> list[str]:
        out = [tool.version() for tool in self.tools]  # error: COB110
        for name in self.names:
            out.append(name.upper())
        return out


async def avatar(name: str) -> bytes:
    avatar_file = None
    if name:
        avatar_file = open(name, "rb")  # error: COB100
    return avatar_file.read() if avatar_file else b""  # error: COB100


async def buffered(data: bytes) -> bytes:
    buf = None
    if data:
        buf = io.BytesIO(data)
    return buf.read() if buf else b""


class Cache:
    location: Union[str, Path, None] = None
    label: str | Path = ""

    async def clear(self) -> None:
        if self.location and self.location.exists():  # error: COB100
            self.location.unlink()  # error: COB100

    async def rename(self) -> str:
        return str(self.label.replace("a", "b"))  # str has replace too: which one is unknown
