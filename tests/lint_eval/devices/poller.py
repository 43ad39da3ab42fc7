"""Coroutines calling the abstract methods of devices/base.py."""

from tests.lint_eval.devices.base import Device, Sensor


async def poll(dev: Device) -> bytes:
    return dev.read()  # error: COB110 [medium]


async def measure(sensor: Sensor) -> float:
    return sensor.sample()
