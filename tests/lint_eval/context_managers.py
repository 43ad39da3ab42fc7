"""``with obj:`` runs ``type(obj).__enter__`` where the ``with`` is: a project class whose
``__enter__`` takes a thread lock or sleeps blocks the loop there, directly or through a
helper; one whose ``__enter__`` does nothing does not."""

import threading
import time


class SharedState:
    def __init__(self) -> None:
        self._lock = threading.RLock()

    def __enter__(self) -> "SharedState":
        self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class Scope:
    def __enter__(self) -> "Scope":
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class Throttle:
    def __enter__(self) -> "Throttle":
        time.sleep(0.1)
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def snapshot(state: SharedState) -> None:
    with state:
        return None


async def publish(state: SharedState, scope: Scope) -> None:
    with state:  # error: COB110 [medium]
        pass
    with scope:
        pass
    with Throttle():  # error: COB110 [medium]
        pass
    snapshot(state)  # error: COB110 [medium]
