"""Two hops from the event loop, and still found."""


def slurp(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()
