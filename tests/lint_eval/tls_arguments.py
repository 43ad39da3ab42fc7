"""``ssl.create_default_context`` reads CA files only when given ``cafile``/``capath``, or
given no CA at all for a purpose that verifies the peer: ``cadata=`` loads from memory and
``Purpose.CLIENT_AUTH`` (a server's context, ``CERT_NONE``) loads nothing. Loading the
server's own certificate chain still reads files."""

import ssl
from ssl import Purpose, create_default_context


async def from_memory(pem: str) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=pem)


async def server(cert: str) -> ssl.SSLContext:
    context = create_default_context(Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert)  # error: COB100 [high]
    return context


async def server_keyword() -> ssl.SSLContext:
    return ssl.create_default_context(purpose=ssl.Purpose.CLIENT_AUTH)


async def client() -> ssl.SSLContext:
    return ssl.create_default_context()  # error: ASYNC230


async def client_purpose() -> ssl.SSLContext:
    return ssl.create_default_context(ssl.Purpose.SERVER_AUTH)  # error: COB100 [high]


async def files_and_memory(path: str, pem: str) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=path, cadata=pem)  # error: COB100 [high]


async def options(kw: dict) -> ssl.SSLContext:
    return ssl.create_default_context(**kw)  # error: COB100 [high]
