"""Reading a property runs its getter: a getter that blocks, read on the loop, is a chain
(``x.p`` is a call of ``T.p``), whether the receiver is ``self``, a typed parameter or a
getter's own result; a plain attribute, a method read as a value, or a getter that
does not block is nothing."""

import functools
import socket
import time


class Request:
    def __init__(self, host: str | None) -> None:
        self._host = host
        self.path = "/"

    @property
    def host(self) -> str:
        if self._host is not None:
            return self._host
        return socket.getfqdn()

    @host.setter
    def host(self, value: str) -> None:
        self._host = value

    @property
    def scheme(self) -> str:
        return "http"

    @functools.cached_property
    def local_name(self) -> str:
        return socket.getfqdn()

    def close(self) -> None:
        time.sleep(1)

    async def url(self) -> str:
        return f"{self.scheme}://{self.host}{self.path}"  # error: COB110


class Session:
    def __init__(self) -> None:
        self._request: Request | None = None

    @property
    def request(self) -> Request:
        return Request(None)


async def handler(request: Request) -> str:
    return request.host  # error: COB110


async def cached(request: Request) -> str:
    return request.local_name  # error: COB110


async def nested(session: Session) -> str:
    return session.request.host  # error: COB110


async def plain(request: Request) -> str:
    callback = request.close  # a bound method read as a value: nothing runs
    return request.scheme + request.path + str(callback)


def host_of(request: Request) -> str:
    return request.host


async def via_helper(request: Request) -> str:
    return host_of(request)  # error: COB110


async def assigns(request: Request) -> None:
    request.host = "example.org"  # the setter: no getter runs


def reify(wrapped):  # a cached-property descriptor of the project's own (aiohttp's name)
    return property(wrapped)


class Message:
    @reify
    def sender(self) -> str:
        return socket.getfqdn()


async def reified(message: Message) -> str:
    return message.sender  # error: COB110
