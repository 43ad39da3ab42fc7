"""A coroutine that a later def of the same name replaces before anything calls it never
runs (a test written twice: pytest collects the last one); one registered by its decorator
(a route per def), or read between the two defs, does run."""

import time

import pytest
from fastapi import FastAPI

app = FastAPI()


@pytest.mark.asyncio
async def test_reconnect() -> None:
    time.sleep(0.1)


@pytest.mark.asyncio
async def test_reconnect() -> None:  # noqa: F811
    time.sleep(0.1)  # error: ASYNC251


@app.get("/a")
async def handler() -> None:
    time.sleep(0.1)  # error: ASYNC251


@app.get("/b")
async def handler() -> None:  # noqa: F811
    time.sleep(0.1)  # error: ASYNC251


async def job() -> None:
    time.sleep(0.1)  # error: ASYNC251


JOBS = [job]


async def job() -> None:  # noqa: F811
    time.sleep(0.1)  # error: ASYNC251
