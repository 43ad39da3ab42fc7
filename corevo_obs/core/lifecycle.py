"""The lifecycle every public class shares, so a user never guesses which verb to call.

``close()`` ends a component that runs no coroutine to stop (a thread, a socket, a file);
``aclose()`` is a coroutine, for components that stop tasks on the loop. Each class also
is a context manager of the same kind (``with`` / ``async with``). The development
tree's verbs (``stop()``, a coroutine ``close()``) are gone (0.2 kept them one release).

A component that *runs* something (a listener, a thread, a task) is a :class:`Service` or
an :class:`AsyncService` and follows one rule, kept here: ``start()`` returns the
component itself (so ``with X().start() as x`` reads as it runs) and starts only what is
not running (a second ``start()``, or a ``with`` after ``start()``, starts nothing);
``close()`` / ``aclose()`` stops what runs and is a no-op when nothing does (twice, or
never started). A class marks its start body with :func:`starts` and its stop body with
:func:`stops` / :func:`astops`; the decorators hold the rule, the bodies only do the work.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Self, TypeVar


class Closing:
    """``with component:`` closes it on exit; subclasses define ``close()``."""

    def close(self) -> None:
        """Release what the component holds; safe to call twice."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClosing:
    """``async with component:`` awaits ``aclose()`` on exit; subclasses define ``aclose()``."""

    async def aclose(self) -> None:
        """Release what the component holds; safe to call twice."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class Runs:
    """Whether ``start()`` ran and no stop has run since: the state the decorators keep."""

    _started: bool = False

    def _is_running(self) -> bool:
        """True between ``start()`` and the stop; a class may also check what it runs (a
        task that ended with its loop runs no more: a start then starts it again)."""
        return self._started


R = TypeVar("R", bound=Runs)
P = ParamSpec("P")
F = TypeVar("F", bound=Callable[..., object])


def starts(body: Callable[Concatenate[R, P], None]) -> Callable[Concatenate[R, P], R]:
    """``start()``: run ``body`` unless the component runs already; return the component."""

    def start(self: R, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if not self._is_running():
            body(self, *args, **kwargs)
            self._started = True
        return self

    return _returning_self(start, body)


def _returning_self(start: F, body: Callable[..., object]) -> F:
    """help() and the API reference show the body's parameters and ``-> Self``."""
    _named(start, body).__signature__ = inspect.signature(body).replace(  # type: ignore[attr-defined]
        return_annotation="Self")
    return start


def _named(method: F, body: Callable[..., object]) -> F:
    functools.update_wrapper(method, body)
    return method


def astarts(
    body: Callable[Concatenate[R, P], Awaitable[None]],
) -> Callable[Concatenate[R, P], Coroutine[Any, Any, R]]:
    """:func:`starts` for a start that must await (a subscription made before it returns)."""

    async def start(self: R, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if not self._is_running():
            await body(self, *args, **kwargs)
            self._started = True
        return self

    return _returning_self(start, body)


def stops(body: Callable[Concatenate[R, P], None]) -> Callable[Concatenate[R, P], None]:
    """``close()``: run ``body`` once per start; without a start, or the second time, nothing."""

    def close(self: R, /, *args: P.args, **kwargs: P.kwargs) -> None:
        if self._started:
            self._started = False  # first: a stop reached again from inside the body is a no-op
            body(self, *args, **kwargs)

    return _named(close, body)


def astops(
    body: Callable[Concatenate[R, P], Awaitable[None]],
) -> Callable[Concatenate[R, P], Coroutine[Any, Any, None]]:
    """:func:`stops` for ``aclose()``."""

    async def aclose(self: R, /, *args: P.args, **kwargs: P.kwargs) -> None:
        if self._started:
            self._started = False
            await body(self, *args, **kwargs)

    return _named(aclose, body)


class Service(Runs, Closing):
    """Runs something stopped without the loop; ``with`` starts it unless it runs."""

    def start(self) -> Self:
        """Start (a subclass's body, decorated with :func:`starts`); returns ``self``."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()


class AsyncService(Runs, AsyncClosing):
    """Runs tasks on the loop; ``async with`` starts it (on the running loop) unless it runs."""

    def start(self) -> Self:
        """Start on the running loop (a subclass's body, decorated with :func:`starts`)."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self.start()


class DualService(Service):
    """A :class:`Service` that a loop can also stop without blocking: ``close()`` joins,
    ``aclose()`` awaits; ``with`` and ``async with`` both start it unless it runs."""

    async def aclose(self) -> None:
        """Stop without blocking the loop; safe to call twice."""

    async def __aenter__(self) -> Self:
        return self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AwaitedService(Runs, AsyncClosing):
    """An :class:`AsyncService` whose start awaits (``await x.start()`` returns ``x``)."""

    async def start(self) -> Self:
        """Start (a subclass's body, decorated with :func:`astarts`); returns ``self``."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return await self.start()
