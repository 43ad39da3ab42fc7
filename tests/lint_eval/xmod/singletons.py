"""Module-level instances, imported by coroutines elsewhere (``from .singletons import
auth``): a module without coroutines, read once a chain reaches it."""

import time

import bcrypt
import httpx


class Auth:
    def check(self, password: bytes, hashed: bytes) -> bool:
        return bcrypt.checkpw(password, hashed)

    def name(self) -> str:
        return "auth"


class Backoff:
    def pause(self) -> None:
        time.sleep(1)


auth = Auth()
either = Backoff()
either = Auth()  # two types: no one type for importers
http = httpx.Client()
