"""Test doubles (a module under a ``testing`` directory): library calls of the abstract
method do not land here, a test's own call still does."""

import time

from tests.lint_eval.doubles.store import Store


class SleepyStore(Store):
    def load(self) -> bytes:
        time.sleep(0.1)
        return b""


async def exercise(store: Store) -> bytes:
    return store.load()  # error: COB110 [medium]
