"""ASYNC232: a method of a sync file object inside async def, its type from ``open()``,
a ``with`` target or an annotation (``io.TextIOWrapper``, ``BufferedReader``,
``BufferedWriter``, ``BufferedRandom``, also inside ``Optional`` and ``| None``)."""
from __future__ import annotations

import io
from io import BufferedReader, TextIOWrapper
from typing import Optional


async def annotated(a: io.TextIOWrapper, b: BufferedReader, c: io.BufferedWriter,
                    d: io.BufferedRandom, e: Optional[TextIOWrapper],
                    f: io.BufferedReader | None) -> None:
    a.read()  # error: ASYNC232
    a.readline()  # error: ASYNC232
    a.readlines()  # error: ASYNC232
    b.read(10)  # error: ASYNC232
    c.write(b"x")  # error: ASYNC232
    c.writelines([b"x"])  # error: ASYNC232
    c.flush()  # error: ASYNC232
    d.truncate(0)  # error: ASYNC232
    e.write("x")  # error: ASYNC232
    f.close()  # error: ASYNC232  # error: COB100 [medium] (anything to flush? a guess)


async def built(p: str) -> None:
    fh = open(p)  # error: ASYNC230
    fh.read()  # error: ASYNC232
    fh.close()  # opened read-only: nothing to flush (flake8-async reports it; file_modes.py)
    with open(p, "w") as out:  # error: ASYNC230
        out.write("x")  # error: ASYNC232


async def in_memory(buf: io.BytesIO, text: io.StringIO, fh: io.TextIOWrapper) -> None:
    buf.read()
    text.write("x")
    io.BytesIO(b"x").read()
    fh.fileno()  # no I/O
    fh.name
