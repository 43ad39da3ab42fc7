"""Abstract methods implemented by project subclasses: a call of one through a parameter
typed with the base runs some subclass's code; which one is a guess, so a blocking
implementation is reported at medium (the false twin: no implementation blocks)."""

from abc import ABC, abstractmethod


class Device(ABC):
    @abstractmethod
    def read(self) -> bytes:
        """One frame from the device."""


class Sensor:
    def sample(self) -> float:
        raise NotImplementedError
