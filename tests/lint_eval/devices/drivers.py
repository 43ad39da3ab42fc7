"""Implementations of an abstract device in a module with no coroutine, in a folder with
no ``__init__.py`` (read because a coroutine calls the abstract method)."""

import serial

from tests.lint_eval.devices.base import Device, Sensor


class SerialDevice(Device):
    def __init__(self, port: str) -> None:
        self.port = port

    def read(self) -> bytes:
        with serial.Serial(self.port) as link:
            return link.read(64)


class FakeDevice(Device):
    def read(self) -> bytes:
        return b""


class MemorySensor(Sensor):
    def sample(self) -> float:
        return 0.0
