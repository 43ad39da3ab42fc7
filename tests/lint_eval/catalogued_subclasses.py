"""A project subclass of a catalogued constructor builds what its base builds: with no
``__init__`` of its own, or one that calls ``super().__init__()`` / ``Base.__init__(self)``.
Twins: arguments that disarm the base (``verify=ctx``, a transport, ``**options`` that may
hold them), passed to the subclass or by its ``__init__`` to the base."""
import ssl
from typing import Any

import httpx


class ApiClient(httpx.AsyncClient):
    pass


class LoginClient(httpx.AsyncClient):
    def __init__(self, region: str) -> None:
        self.region = region
        super().__init__(base_url=f"https://{region}.example.com")


class LegacyClient(httpx.AsyncClient):
    def __init__(self, url: str) -> None:
        httpx.AsyncClient.__init__(self, base_url=url)


class PinnedClient(httpx.AsyncClient):
    def __init__(self, region: str, context: ssl.SSLContext) -> None:
        super().__init__(base_url=region, verify=context)


async def connect(region: str, context: ssl.SSLContext, options: dict[str, Any]) -> None:
    plain = ApiClient()  # error: COB100
    login = LoginClient(region)  # error: COB110
    legacy = LegacyClient(region)  # error: COB110
    pinned = PinnedClient(region, context)
    shared = ApiClient(verify=context)
    spread = ApiClient(**options)
    for client in (plain, login, legacy, pinned, shared, spread):
        await client.get("/")
