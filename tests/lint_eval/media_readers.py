"""Readers of images, fonts and tables: a path is file I/O on the loop, an in-memory
buffer is not (recall batch 11's env-canada and llama-stack cases)."""
import io

import pandas as pd
from PIL import Image, ImageFont


async def from_memory(data: bytes, buf: io.BytesIO) -> None:
    Image.open(io.BytesIO(data))
    Image.open(fp=buf)
    ImageFont.truetype(io.BytesIO(data), 12)
    pd.read_csv(io.StringIO("a,b\n1,2\n"))
    pd.read_excel(buf)
    pd.read_parquet(io.BytesIO(data))


async def from_disk(path: str) -> None:
    Image.open(path)  # error: COB100
    ImageFont.load(path)  # error: COB100
    ImageFont.truetype(path, 12)  # error: COB100
    pd.read_csv(path)  # error: COB100
    pd.read_excel(path)  # error: COB100
    pd.read_json(path)  # error: COB100
    pd.read_table(path)  # error: COB100
