"""The lint's records cross process boundaries (scan workers) by pickle: each comes back
equal and still frozen."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from corevo_obs.tooling.lint.model import CallSite, Edge, FileResult, Finding, FuncFacts, Pending
from corevo_obs.tooling.lint.narrowing import Args, Atom, Kind

ARGS = Args((("v", 1), ("p", "path")), (("mode", ("v", "rb")),), forward=True)
ATOM = Atom("path", "isinstance", (("v", Kind("builtins.str")),))
FINDING = Finding("a.py", 3, 5, "COB100", "open() blocks", "m.f", "open(p)", "medium",
                  ("b.py",), "stall")
SITE = CallSite("m.helper", "a.py", 4, 9, "f", "m.f", "helper(p)", frozenset({"COB110"}),
                ARGS, frozenset({"close"}), True)
RECORDS = [Kind("builtins.dict"), ATOM, ARGS, FINDING, SITE,
           Edge("m.g", (ATOM,), ARGS, frozenset({"x"}), True), Pending(FINDING, ("io.BytesIO",))]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_frozen_record_round_trips(record: object) -> None:
    back = pickle.loads(pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL))
    assert back == record and type(back) is type(record)
    name = dataclasses.fields(record)[0].name  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(back, name, None)


def test_a_file_summary_round_trips() -> None:
    facts = FuncFacts("helper", "a.py", 2, blocks=[("open()", (ATOM,))],
                      edges=[Edge("m.g")], params=("path",), names=frozenset({"path"}),
                      defaults={"mode": ("v", "rb")}, unless={0: ("m.T",)})
    result = FileResult("a.py", "m", findings=[FINDING], funcs={"m.helper": facts},
                        sites=[SITE], written=frozenset({"x"}), pending=[Pending(FINDING, ())])
    back = pickle.loads(pickle.dumps(result))
    assert back == result
    assert back.funcs["m.helper"].blocking is None  # guarded: no unconditional block

