"""A finding is silenced by ``# noqa: <its code>``, a bare ``# noqa`` and a peer tool's
code that its rule covers (flake8-async's and ruff's ASYNC2xx): a project migrating from
them does not annotate twice. A peer code of another rule silences nothing."""

import subprocess
import time


async def legacy(path: str) -> bytes:
    with open(path, "rb") as fh:  # noqa: ASYNC230
        data = fh.read()  # noqa
    time.sleep(0.1)  # noqa: ASYNC251
    time.sleep(0.1)  # noqa: COB104
    time.sleep(0.1)  # noqa: ASYNC230  # error: COB104
    subprocess.run(["true"])  # noqa: E501  # error: COB103
    return data
