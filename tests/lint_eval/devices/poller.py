"""Coroutines calling the abstract methods of devices/base.py. Through a typed parameter a
blocking implementation is a medium chain (which subclass runs is a guess); through an
untyped parameter the receiver is not resolved to the project's abstract method at all, so
no tier (least of all high) claims it."""

from tests.lint_eval.devices.base import Device, Sensor


async def poll(dev: Device) -> bytes:
    return dev.read()  # error: COB110 [medium]


async def measure(sensor: Sensor) -> float:
    return sensor.sample()


async def poll_untyped(dev) -> bytes:
    return dev.read()


async def measure_untyped(sensor) -> float:
    return sensor.sample()
