"""The planner's store of searched schedules (engine.planner.solve_store): a stored solve gives the
plan a fresh search gives, a damaged, foreign or weaker entry is a miss, and the claims are always
re-derived."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest

from everlast.engine.planner import PlanInfeasible, Targets, api, certify, plan, solve_store
from everlast.engine.planner import tight as tight_mod
from everlast.engine.planner.api import LEVERS, n_required

TARGETS = Targets(epsilon=40.0, alpha=0.45)
"""A small plan (about 2.5 s of search): bench.planned's quick target."""


class MemStore:
    def __init__(self, namespace: str = "test-code") -> None:
        self.namespace = namespace
        self.d: dict[str, str] = {}

    def get(self, key: str) -> str | None:
        return self.d.get(key)

    def put(self, key: str, text: str) -> None:
        self.d[key] = text


def _forget() -> None:
    """Drop the in-process caches, so that the next plan asks the store (or searches)."""
    api.forget_plans()


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    _forget()
    yield
    _forget()


def _no_search(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*a: Any, **k: Any) -> Any:
        raise AssertionError("searched although the store holds the solve")

    monkeypatch.setattr(api, "solve", refuse)
    monkeypatch.setattr(api, "estimate_n", refuse)


def _same(a: api.Plan, b: api.Plan) -> None:
    assert a.n_required == b.n_required
    assert a.schedule == b.schedule
    assert a.certificate == b.certificate
    assert a.checks == b.checks and a.warnings == b.warnings
    assert repr((a.round_plans, a.E1, a.E2, a.r1, a.rD)) == repr((b.round_plans, b.E1, b.E2, b.r1, b.rD))


@pytest.fixture(scope="module")
def cold() -> api.Plan:
    _forget()
    with solve_store.using(None):
        return plan(TARGETS)


def _filled() -> MemStore:
    store = MemStore()
    with solve_store.using(store):
        plan(TARGETS)
    _forget()
    return store


def test_a_stored_solve_gives_the_plan_a_fresh_search_gives(cold: api.Plan, monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemStore()
    with solve_store.using(store) as tally:
        _same(plan(TARGETS), cold)
    assert tally.hits == 0 and tally.misses == len(store.d) > 0
    _forget()
    _no_search(monkeypatch)
    with solve_store.using(store) as tally:
        _same(plan(TARGETS), cold)
    assert tally.hits == len(store.d) and tally.misses == 0


def test_an_inner_none_turns_an_outer_store_off(monkeypatch: pytest.MonkeyPatch) -> None:
    store = _filled()
    calls = []
    real = api.solve
    monkeypatch.setattr(api, "solve", lambda *a: calls.append(1) or real(*a))
    with solve_store.using(store), solve_store.using(None) as tally:
        plan(TARGETS)
    assert calls and tally.hits == tally.misses == 0


def _solve_entry(store: MemStore) -> str:
    (k,) = [k for k, v in store.d.items() if '"specs"' in json.loads(v)["body"]]
    return k


def _tamper(store: MemStore, factor: float, reseal: bool) -> None:
    """Scale round 1's per-query level eps_bt in the stored solve (keeping or breaking its digest)."""
    k = _solve_entry(store)
    entry = json.loads(store.d[k])
    body = json.loads(entry["body"])
    body["specs"][0]["eps_bt"] *= factor
    if reseal:
        store.d[k] = solve_store.seal(store, k, body)
    else:
        entry["body"] = json.dumps(body, sort_keys=True)
        store.d[k] = json.dumps(entry)


def test_a_damaged_entry_is_a_miss_and_searched_again(cold: api.Plan) -> None:
    store = _filled()
    _tamper(store, 0.5, reseal=False)
    with solve_store.using(store) as tally:
        _same(plan(TARGETS), cold)  # the digest does not match: searched afresh, stored again
    assert tally.misses == 1
    assert solve_store.unseal(store, _solve_entry(store), store.d[_solve_entry(store)]) is not None


def test_the_damaged_entry_would_be_served_without_the_digest_check(cold: api.Plan,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutant: a store read that skips the key, namespace and digest check serves the damaged
    schedule (so the test above is what keeps it out)."""
    store = _filled()
    _tamper(store, 0.5, reseal=False)
    monkeypatch.setattr(solve_store, "unseal", lambda s, k, raw: None if raw is None
                        else json.loads(json.loads(raw)["body"]))
    with solve_store.using(store):
        served = plan(TARGETS)
    assert served.schedule is not None and cold.schedule is not None
    assert served.schedule.rounds[0].eps_bt == cold.schedule.rounds[0].eps_bt / 2.0


def test_an_entry_moved_to_another_key_is_a_miss() -> None:
    store = _filled()
    k = _solve_entry(store)
    store.d["0" * 64] = store.d[k]
    assert solve_store.unseal(store, "0" * 64, store.d["0" * 64]) is None
    assert solve_store.unseal(store, k, store.d[k]) is not None


def test_the_certificate_is_derived_from_the_stored_schedule_never_stored(cold: api.Plan) -> None:
    """A well-formed entry for another schedule that still meets the targets (resealed: as if the
    service's user wrote it) is served with the certificate *that* schedule earns: the store holds no claim."""
    store = _filled()
    for v in store.d.values():  # a schedule, a refusal or a float estimate: no certificate, no epsilon
        body = json.loads(json.loads(v)["body"])
        assert isinstance(body, float) or not {"epsilon", "certificate", "steps"} & set(body)
    _tamper(store, 0.5, reseal=True)  # half the per-query level: more noise, a smaller epsilon
    with solve_store.using(store) as tally:
        served = plan(TARGETS)
    assert tally.hits > 0
    assert served.schedule is not None
    assert served.certificate == certify(served.schedule, served.n_required, accounting="tight",
                                         delta=TARGETS.delta)
    assert served.certificate != cold.certificate and served.meets_targets


def test_an_entry_whose_certificate_misses_the_targets_is_searched_again(cold: api.Plan) -> None:
    """Four times round 1's per-query level (resealed): its certificate exceeds the targets, so the entry
    is not used and the search runs again; the plan is the fresh one."""
    store = _filled()
    _tamper(store, 4.0, reseal=True)
    with solve_store.using(store) as tally:
        _same(plan(TARGETS), cold)
    assert tally.misses == 1


def test_without_the_targets_check_the_weaker_entry_would_be_served(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutant of the test above: a store that takes any well-formed entry serves a schedule whose
    certificate misses the targets."""
    store = _filled()
    _tamper(store, 4.0, reseal=True)
    monkeypatch.setattr(api, "_stored_meets", lambda args, sol: True)
    with solve_store.using(store):
        served = plan(TARGETS)
    assert not served.meets_targets


def test_an_entry_of_other_code_is_a_miss(cold: api.Plan, monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemStore("code-a")
    with solve_store.using(store):
        plan(TARGETS)
    other = MemStore("code-b")
    other.d = dict(store.d)
    _forget()
    calls = []
    real = api.solve
    monkeypatch.setattr(api, "solve", lambda *a: calls.append(1) or real(*a))
    with solve_store.using(other):
        _same(plan(TARGETS), cold)
    assert calls, "an entry written by other code was used"


def test_a_refusal_is_kept_and_raised_again(monkeypatch: pytest.MonkeyPatch) -> None:
    t = Targets(epsilon=0.5, eps_h=1.0)  # the halting test alone spends more than epsilon
    store = MemStore()
    with solve_store.using(store), pytest.raises(PlanInfeasible) as first:
        plan(t)
    (entry,) = store.d.values()
    assert json.loads(json.loads(entry)["body"]) == {"infeasible": str(first.value)}
    assert str(first.value).startswith(solve_store.REFUSAL)
    _forget()
    _no_search(monkeypatch)
    with solve_store.using(store) as tally, pytest.raises(PlanInfeasible) as again:
        plan(t)
    assert str(again.value) == str(first.value) and tally.hits == 1


def test_another_error_is_not_kept() -> None:
    store = MemStore()

    def broken(*a: Any) -> Any:
        raise ValueError("math domain error")

    with solve_store.using(store), pytest.raises(ValueError):
        solve_store.solve_through(broken, (1,), 2, lambda s: True)
    assert store.d == {}


def test_no_store_no_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    assert solve_store.estimate_through(lambda *a: 3.0, (1,)) == 3.0


def _solve_args() -> tuple[Any, ...]:
    t = TARGETS
    return (t.epsilon, t.delta, t.alpha, t.beta, t.vc, api.tight_options(t))


@pytest.fixture(scope="module")
def body() -> dict[str, Any]:
    with solve_store.using(None):
        return solve_store.encode(tight_mod.solve(*_solve_args()))


def test_a_decoded_solve_is_the_solve(body: dict[str, Any]) -> None:
    sol = tight_mod.solve(*_solve_args())
    back = solve_store.decode(json.loads(json.dumps(body)), TARGETS.rounds)
    assert repr(back) == repr(sol)  # repr: NaN fields compare unequal to themselves


CHANGES = {
    "extra field": lambda b: b["specs"][0].update(extra=1),
    "missing field": lambda b: b["specs"][0].pop("T"),
    "bool for int": lambda b: b["specs"][0].update(T=True),
    "float for int": lambda b: b["specs"][0].update(T=214.5),
    "integral float for int": lambda b: b["specs"][0].update(T=float(b["specs"][0]["T"])),
    "null for int": lambda b: b["specs"][0].update(T=None),
    "list for int": lambda b: b["specs"][0].update(T=[1]),
    "str for float": lambda b: b.update(E1="x"),
    "int for float": lambda b: b.update(E1=1),
    "n below 1": lambda b: b.update(n_required=-5),
    "a size below 1": lambda b: b["specs"][1].update(lam=0),
    "a round missing": lambda b: (b["specs"].pop(), b["rounds"].pop()),
    "rounds misnumbered": lambda b: b["rounds"][0].update(round=7),
    "no specs": lambda b: b.pop("specs"),
    "specs not a list": lambda b: b.update(specs={}),
    "a round not an object": lambda b: b["rounds"].__setitem__(0, 3),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_decode_takes_exactly_the_solvers_shape(body: dict[str, Any], change: str) -> None:
    bad = json.loads(json.dumps(body))
    CHANGES[change](bad)
    with pytest.raises((ValueError, TypeError)):
        solve_store.decode(bad, TARGETS.rounds)


def test_a_malformed_entry_is_a_miss_through_the_planner(cold: api.Plan) -> None:
    store = _filled()
    k = _solve_entry(store)
    b = json.loads(json.loads(store.d[k])["body"])
    b["specs"][0]["T"] = None
    store.d[k] = solve_store.seal(store, k, b)
    with solve_store.using(store) as tally:
        _same(plan(TARGETS), cold)
    assert tally.misses == 1


def _n_or_refusal(fn: Any, t: Targets) -> int | str:
    try:
        return int(fn(t))
    except PlanInfeasible as exc:
        return str(exc)


def _same_n(t: Targets) -> None:
    with solve_store.using(None):
        assert _n_or_refusal(n_required, t) == _n_or_refusal(lambda u: plan(u).n_required, t)


@pytest.mark.parametrize("off", [dict(off) for *_, off in LEVERS], ids=[key for key, *_ in LEVERS])
def test_the_ablations_n_is_the_plans(off: dict[str, str]) -> None:
    _same_n(dataclasses.replace(TARGETS, **off))  # type: ignore[arg-type]


@pytest.mark.parametrize("t", [Targets(epsilon=0.5, accounting="paper"), Targets(epsilon=2.0, alpha=0.6),
                               Targets(epsilon=0.5, eps_h=1.0)], ids=["paper", "invalid", "infeasible"])
def test_n_required_refuses_as_plan_does(t: Targets) -> None:
    _same_n(t)
