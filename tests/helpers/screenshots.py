"""Screenshots in headless Chromium, and their PNG decoded with the standard library
only (8-bit, non-interlaced RGB/RGBA, what Chromium writes), so tests look at what was
drawn."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

from tests.conftest import _need

#: as root, on a closed network: no sandbox, no background connections or updates
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0")


def chromium() -> str:
    """The browser's path; skips (fails under $COREVO_REQUIRE_SERVERS) when missing."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        _need("chromium not installed (apt-get install chromium)")
    assert found is not None
    return found


def shoot(url: str, png: Path, profile: Path, size: tuple[int, int],
          timeout: float = 60) -> list[str]:
    """Screenshot ``url`` into ``png`` with a fresh profile; the console lines logged."""
    profile.mkdir()
    done = subprocess.run(
        [chromium(), *FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}",
         f"--window-size={size[0]},{size[1]}", url],
        capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0 and png.exists(), done.stderr[-2000:]
    return [line for line in done.stderr.splitlines() if ":CONSOLE" in line]


def rgb_rows(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and each row's RGB bytes (alpha dropped)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w, h, bpp = 8, [], 0, 0, 0
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and not interlace, (depth, colour)
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + n
    raw, stride = zlib.decompress(b"".join(idat)), w * bpp
    assert len(raw) == h * (stride + 1), "truncated image data"
    prev, rows = bytearray(stride), list[bytes]()
    for y in range(h):
        f = raw[y * (stride + 1)]  # the row's filter
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 2:  # Up, the commonest: one pass without the neighbours
            line = bytearray((x + b) & 255 for x, b in zip(line, prev, strict=True))
        elif f:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
                if f == 1:
                    line[i] = (line[i] + a) & 255
                elif f == 3:
                    line[i] = (line[i] + ((a + b) >> 1)) & 255
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    line[i] = (line[i] + (a if pa <= pb and pa <= pc
                                          else b if pb <= pc else c)) & 255
        rows.append(bytes(line) if bpp == 3
                    else bytes(v for i, v in enumerate(line) if i % 4 != 3))
        prev = line
    return w, h, rows


def rgb_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and every pixel as 3 RGB bytes, row by row."""
    w, h, rows = rgb_rows(data)
    return w, h, [row[i:i + 3] for row in rows for i in range(0, len(row), 3)]
