"""The rule registry: each rule family declares its codes in one place and registers them.

A family is a class with ``family`` and ``error_codes`` (code -> :class:`Rule` fields),
decorated with :func:`register` (the flake8-async ``error_class`` model). The registry is
the only source of rule names, summaries and message templates: the SARIF rules table,
docs/lint.md and the config's code validation all read it. A :class:`Selection` says
which codes a run reports, and a message is filled only with the fields its template
names, so a wrong field list fails loudly instead of printing a blank.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar


@dataclass(frozen=True)
class Rule:
    """One stable code: ``name`` (a slug), a one-line ``summary``, the message template,
    its ``family`` (the rules module that emits it) and the flake8-async codes it covers."""

    code: str
    name: str
    summary: str
    message: str
    family: str
    peers: tuple[str, ...] = ()

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(f for _, f, _, _ in string.Formatter().parse(self.message) if f)

    def format(self, **fields: str) -> str:
        """The message; ``fields`` must be exactly the template's fields."""
        if set(fields) != self.fields:
            raise ValueError(f"{self.code}: message needs {sorted(self.fields)}, "
                             f"got {sorted(fields)}")
        return self.message.format(**fields)


@dataclass(frozen=True)
class Spec:
    """How a family writes one code: ``Spec(name, summary, message, peers=(...))``."""

    name: str
    summary: str
    message: str
    peers: tuple[str, ...] = ()


class Family:
    """Base of a rule family; subclasses set ``family`` and ``error_codes``."""

    family: ClassVar[str]
    error_codes: ClassVar[Mapping[str, Spec]]


RULES: dict[str, Rule] = {}
FAMILIES: dict[str, type[Family]] = {}
_CODE = re.compile(r"^COB\d{3}$")


def register(cls: type[Family]) -> type[Family]:
    """Class decorator: add the family's codes to :data:`RULES` (each code once)."""
    if cls.family in FAMILIES:
        raise RuntimeError(f"rule family {cls.family!r} registered twice")
    for code, spec in cls.error_codes.items():
        if not _CODE.match(code):
            raise RuntimeError(f"{cls.__name__}: bad rule code {code!r}")
        if code in RULES:
            raise RuntimeError(f"{code} defined twice ({RULES[code].family}, {cls.family})")
        RULES[code] = Rule(code, spec.name, spec.summary, spec.message, cls.family, spec.peers)
    FAMILIES[cls.family] = cls
    return cls


# how sync code that runs on the loop without an ``async def`` is named in messages: a
# protocol's callback the loop calls, a class's constructor its users' coroutines run
PROTOCOL_CALLBACK = "(a protocol callback)"
CONSTRUCTOR = "(its users' coroutines build it: a class with async methods)"
LOOP_CALLBACK = "(a callback it hands the loop)"  # X hands it: it runs on the loop
LOOP_ENTRIES = (PROTOCOL_CALLBACK, CONSTRUCTOR)
_ON_LOOP = (("inside async def {func}", "on the loop in {func}"),
            ("in async def {func}", "in {func}"))


def entry_name(func: str) -> str:
    """``Proto.data_received`` of ``Proto.data_received (a protocol callback)``: the name
    that starts a chain."""
    for marker in (*LOOP_ENTRIES, LOOP_CALLBACK):
        if func.endswith(marker):
            return func[:-len(marker)].rstrip()
    return func


def chain_text(func: str, names: list[str]) -> str:
    """``entry -> hop -> ... -> call``; a protocol callback's chain starts at the callback
    itself, which is named once, not as its own first hop."""
    entry = entry_name(func)
    return " -> ".join([entry, *(names[1:] if names and names[0] == entry else names)])


def message(code: str, **fields: str) -> str:
    """The rule's message; for sync code the loop runs (a protocol callback, a guessed
    constructor, a callback handed to the loop by a def that may be sync) "inside async
    def X" reads "on the loop in X"."""
    text = RULES[code].format(**fields)
    func = fields.get("func", "")
    if func.endswith((*LOOP_ENTRIES, LOOP_CALLBACK)):
        for old, new in _ON_LOOP:
            said = old.format(func=func)
            if said in text:
                return text.replace(said, new.format(func=func), 1)
    return text


@dataclass(frozen=True)
class Selection:
    """The codes a run reports: ``select`` prefixes (default: all) minus ``ignore`` ones.

    Example::

        Selection.of(select=("COB1",), ignore=("COB11",)).any_of("chains")  # False
    """

    codes: frozenset[str] = field(default_factory=lambda: frozenset(RULES))

    @classmethod
    def of(cls, select: Iterable[str] = (), ignore: Iterable[str] = ()) -> Selection:
        chosen = tuple(select) or ("COB",)
        dropped = tuple(ignore)
        return cls(frozenset(c for c in RULES if c.startswith(chosen)
                             and not (dropped and c.startswith(dropped))))

    def enabled(self, code: str) -> bool:
        return code in self.codes

    def any_of(self, family: str) -> bool:
        """True when the family has a selected code, i.e. its work is worth doing."""
        return any(RULES[c].family == family for c in self.codes)
