"""A connection given ssl=True, or a wss:// URL and no ssl argument, makes asyncio build a
new default SSL context (the CA bundle read from disk) on the loop for every connection;
a context built once and passed, a plain ws:// or tcp connection, or a URL the lint cannot
read are quiet."""

import asyncio
import ssl

import websockets

CONTEXT = ssl.create_default_context()


async def tcp(host: str) -> None:
    await asyncio.open_connection(host, 443, ssl=True)  # error: COB100
    await asyncio.open_connection(host, 443, ssl=CONTEXT)
    await asyncio.open_connection(host, 80)


async def stream(host: str, url: str, options: dict) -> None:
    async with websockets.connect("wss://stream.example.com/ws") as ws:  # error: COB100
        await ws.send("hi")
    async with websockets.connect(f"wss://{host}/realtime") as ws:  # error: COB100
        await ws.send("hi")
    async with websockets.connect(f"wss://{host}/realtime", ssl=CONTEXT) as ws:
        await ws.send("hi")
    async with websockets.connect("ws://" + host) as ws:
        await ws.send("hi")
    async with websockets.connect(url) as ws:
        await ws.send("hi")
    async with websockets.connect(f"wss://{host}/", **options) as ws:
        await ws.send("hi")


async def protocol(host: str) -> None:
    loop = asyncio.get_running_loop()
    await loop.create_connection(asyncio.Protocol, host, 443, ssl=True)  # error: COB100
    await loop.create_connection(asyncio.Protocol, host, 443, ssl=CONTEXT)
