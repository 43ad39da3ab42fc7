"""The shutdown verbs every public class shares, so a user never guesses which one to await.

``close()`` ends a component that runs no coroutine to stop (a thread, a socket, a file);
``aclose()`` is a coroutine, for components that stop tasks on the loop. Each class also
is a context manager of the same kind (``with`` / ``async with``). Verbs that 0.2's
development tree used (``stop()``, a coroutine ``close()``) remain one release as aliases
that warn.
"""

from __future__ import annotations

import warnings
from typing import Final, Self

#: the release that removes the aliases
ALIASES_REMOVED_IN: Final = "0.3"


def renamed(owner: object, old: str, new: str) -> None:
    """Warn once per call site that ``old`` is an alias of ``new`` (for the alias's body)."""
    warnings.warn(
        f"{type(owner).__name__}.{old}() is deprecated: call {new}() "
        f"(the alias is removed in {ALIASES_REMOVED_IN})", DeprecationWarning, stacklevel=3)


class Closing:
    """``with component:`` closes it on exit; subclasses define ``close()``."""

    def close(self) -> None:
        """Release what the component holds; safe to call twice."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClosing:
    """``async with component:`` awaits ``aclose()`` on exit; subclasses define ``aclose()``.

    ``close()`` is the deprecated coroutine alias (the development tree's verb).
    """

    async def aclose(self) -> None:
        """Release what the component holds; safe to call twice."""

    async def close(self) -> None:
        """Deprecated: ``await aclose()``."""
        renamed(self, "close", "aclose")
        await self.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
