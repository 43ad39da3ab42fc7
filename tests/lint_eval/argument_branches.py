"""A helper's blocking branch that its call's arguments rule out: ``ssl is True`` tested
before the parameter is rebound in an ``if``/``elif`` (each rebinding's guard is kept), and
``isinstance(ssl, T)`` false for ``None``. The default ``ssl=None`` builds no context; a
caller passing ``ssl=True`` does."""

import socket
import ssl as _ssl


class Channel:
    def __init__(self, host: str = "localhost", ssl=None) -> None:
        if ssl is True:
            ssl = self._default_context()
        elif isinstance(ssl, _ssl.DefaultVerifyPaths):
            ssl = self._default_context(ssl.cafile)
        self._ssl = ssl

    def _default_context(self, cafile=None):
        return _ssl.create_default_context(cafile=cafile)


async def plain(host: str) -> Channel:
    return Channel(host)


async def named(host: str) -> Channel:
    return Channel(host=host, ssl=None)


async def secure(host: str) -> Channel:
    return Channel(host, ssl=True)  # error: COB110 [medium]


async def verify_paths(host: str, paths: _ssl.DefaultVerifyPaths) -> Channel:
    return Channel(host, ssl=paths)  # error: COB110 [medium]


def loader(path, mode=None):
    if mode is not True:
        return None
    with open(path) as fh:
        return fh.read()


async def load_off(path: str) -> None:
    loader(path)
    loader(path, mode=False)


async def load_on(path: str) -> None:
    loader(path, mode=True)  # error: COB110 [medium]


class Registerer:
    def __init__(self, parameters: dict) -> None:
        if "ep" not in parameters:
            parameters = {**parameters, "ep": socket.getfqdn()}
        self.parameters = parameters


async def register_named(name: str) -> Registerer:
    return Registerer({"ep": name, "lt": 60})


async def register_unnamed() -> Registerer:
    return Registerer({"lt": 60})  # error: COB110 [medium]


async def register_given(parameters: dict) -> Registerer:
    return Registerer(parameters)  # error: COB110 [medium]
