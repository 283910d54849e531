"""Per-client quotas and the burn-rate signal (engine.quotas, engine.burn, engine.clients): the
vectorized decisions against the one-query-at-a-time specification, batch invariance and replay of
the predictor with them on, their schedule and state formats, and bad input."""

from __future__ import annotations

import functools
import itertools
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from everlast.engine import between_thresholds as bt
from everlast.engine import clients as cl
from everlast.engine import codec
from everlast.engine import quotas as qt
from everlast.engine.burn import BLOCK, Burn, BurnState, windows
from everlast.engine.design import NoisePlan
from everlast.engine.errors import CorruptState, InvalidInput, InvalidSchedule
from everlast.engine.noise import NoiseStream
from everlast.engine.phases import Phase
from everlast.engine.predictor import FORMAT, FORMAT_CLIENTS, Predictor
from everlast.engine.schedule import Schedule
from everlast.engine.serving import Refusal
from tests.engine.helpers import BURN, QUOTAS, client_predictor, predictor, schedule

I8 = NDArray[np.int8]
N = 3000  # five rounds of 600
_g = np.random.default_rng(11)
WHO = _g.choice(3, N, p=[0.3, 0.6, 0.1])
POINTS = np.where(WHO == 0, 0.5, _g.random(N))  # the prober queries the boundary: split votes, tops
NAMES: list[cl.ClientId] = ["prober", b"honest", None]
CLIENTS: list[cl.ClientId] = [NAMES[w] for w in WHO]


# -- the vectorized decisions against the specification -------------------------------------------------


def run_decide(table: qt.ClientTable, keys: list[int], tops: list[bool], xi: list[int], plan: qt.QuotaPlan,
               rho_of: Any) -> tuple[list[bool], qt.ClientTable]:
    raw = np.asarray(keys, dtype=np.uint64)
    u, codes = np.unique(raw, return_inverse=True)
    batch = cl.ClientBatch(u, codes.reshape(-1).astype(np.int64))
    is_top = np.asarray(tops, dtype=np.bool_)

    def draw(new: NDArray[np.uint64]) -> NDArray[np.int64]:
        return np.asarray([rho_of(int(k)) for k in new.tolist()], dtype=np.int64)

    d = qt.decide(table, batch, is_top, np.asarray(xi, dtype=np.int64), plan, draw)
    return d.refused.tolist(), qt.commit(d, is_top)


@st.composite
def quota_cases(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(0, 120))
    pool = draw(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=6, unique=True))
    keys = draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n))
    tops = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    xi = draw(st.lists(st.integers(-6, 6), min_size=n, max_size=n))
    rhos = {k: draw(st.integers(-3, 3)) for k in pool}
    c0 = draw(st.integers(1, 12))
    cut = draw(st.integers(0, n))
    return {"keys": keys, "tops": tops, "xi": xi, "rhos": rhos, "c0": c0, "cut": cut}


@settings(max_examples=200, deadline=None)
@given(case=quota_cases())
def test_decide_and_commit_are_the_reference_in_any_two_batches(case: dict[str, Any]) -> None:
    plan = qt.QuotaPlan(case["c0"], Fraction(4), Fraction(2))
    rho_of = case["rhos"].__getitem__
    keys, tops, xi, cut = case["keys"], case["tops"], case["xi"], case["cut"]
    spec: dict[int, list[int]] = {}
    want = qt.reference(keys, tops, xi, plan, spec, rho_of)
    first, table = run_decide(qt.ClientTable.empty(), keys[:cut], tops[:cut], xi[:cut], plan, rho_of)
    second, table = run_decide(table, keys[cut:], tops[cut:], xi[cut:], plan, rho_of)
    assert first + second == want
    assert table.keys.tolist() == sorted(spec)
    assert [[int(t), int(f), int(r)] for t, f, r in zip(table.tops, table.fired, table.rho, strict=True)] == [
        spec[k] for k in sorted(spec)]
    assert int(table.tops.sum()) == sum(t for t, r in zip(tops, want, strict=True) if not r)


def test_a_fired_client_stays_refused_and_others_are_not() -> None:
    plan = qt.QuotaPlan(3, Fraction(4), Fraction(2))
    keys = [1, 2, 1, 1, 2, 1, 2, 1]
    tops = [True] * 8
    refused, table = run_decide(qt.ClientTable.empty(), keys, tops, [0] * 8, plan, lambda k: 0)
    # client 1 reaches C = 3 at its third query (answered, the test fires after it); client 2 at its third
    assert refused == [False, False, False, False, False, True, False, True]
    assert table.tops.tolist() == [3, 3] and table.fired.tolist() == [True, True]


@settings(max_examples=150, deadline=None)
@given(n=st.integers(0, 80), data=st.data())
def test_halt_tct_with_quota_refusals_is_the_reference(n: int, data: st.DataObject) -> None:
    T = 20
    v = np.asarray(data.draw(st.lists(st.integers(0, T), min_size=n, max_size=n)), dtype=np.int64)
    z = np.asarray(data.draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n)), dtype=np.int64)
    xi = np.asarray(data.draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n)), dtype=np.int64)
    refused = np.asarray(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=np.bool_)
    c = data.draw(st.integers(1, 12))
    c0 = data.draw(st.integers(1, c))
    plan = NoisePlan(T, 10**6, 8, 12, Fraction(1), None, Fraction(1), Fraction(1), c, c0)
    state = bt.BTState(tops=data.draw(st.integers(0, c - 1)), rho_h=data.draw(st.integers(-2, 2)))
    got = bt.halt_tct(bt.outcomes_tct(v, z, plan), xi, plan, state, refused)
    want = bt.reference(v, z, plan, state, xi=xi, refused=refused)
    assert np.array_equal(got.outcomes, want.outcomes) and got.outcomes.dtype == np.int8
    assert (got.answered, got.state, got.halted) == (want.answered, want.state, want.halted)


# -- burn-rate windows -------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(tops=st.lists(st.booleans(), max_size=300), window=st.integers(1, 40), start=st.integers(0, 100),
       cuts=st.lists(st.integers(0, 300), max_size=4))
def test_windows_release_each_complete_window_once_whatever_the_batches(tops: list[bool], window: int, start: int,
                                                                      cuts: list[int]) -> None:
    burn = Burn(window, 0.5)
    fresh = BurnState(0, NoiseStream.fresh(np.random.default_rng(5), burn.scale, BLOCK))
    # the specification: whole windows of round positions [w W, (w + 1) W), from position `start`
    n, first = len(tops), start // window
    counts: dict[int, int] = {}
    for j, t in enumerate(tops):
        counts[(start + j) // window] = counts.get((start + j) // window, 0) + int(t)
    done = [w for w in sorted(counts) if (w + 1) * window <= start + n]
    # positions before `start` hold no tops in this test: the first window's earlier part adds nothing
    eta = fresh.noise.take(len(done))[0]
    want = [[7, w, counts[w] + int(e)] for w, e in zip(done, eta, strict=True)]
    rows, state, pos = [], fresh, 0
    for hi in [*sorted(c for c in cuts if c <= n), n]:
        got, state = windows(np.asarray(tops[pos:hi], dtype=np.bool_), start + pos, state, window, 7)
        rows += got.tolist()
        pos = max(pos, hi)
    assert rows == want and all(w >= first for _, w, _ in rows)
    assert state.tops == sum(tops[j] for j in range(n) if (start + j) // window not in done)


# -- the predictor with quotas and burn on: replay, batch invariance ----------------------------------------


def answer_in_batches(p: Predictor, xs: NDArray[np.float64], who: list[cl.ClientId],
                      cuts: list[int]) -> dict[str, Any]:
    bounds = [0, *sorted({c for c in cuts if 0 < c < xs.size}), xs.size]
    out: dict[str, list[Any]] = {"labels": [], "outcomes": [], "refusals": [], "fired": [], "rounds": [],
                                 "burn": []}
    for lo, hi in itertools.pairwise(bounds):
        pos = lo
        while pos < hi:
            if p.phase is Phase.TRANSITION_DUE:
                p.transition()
            res = p.answer(xs[pos:hi], who[pos:hi])
            out["labels"].append(res.labels)
            out["outcomes"].append(res.outcomes)
            out["refusals"].append(res.refusals)
            out["fired"].append(res.quota_fired)
            out["rounds"] += [res.round] * res.consumed
            out["burn"] += res.burn.tolist()
            pos += res.consumed
    return {k: (np.concatenate(v) if k in ARRAYS else v) for k, v in out.items()}


ARRAYS = ("labels", "outcomes", "refusals", "fired")


@functools.cache
def reference_run() -> dict[str, Any]:
    return answer_in_batches(client_predictor(), POINTS, CLIENTS, [])


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(np.array_equal(a[k], b[k]) for k in ARRAYS) and (
        a["rounds"], a["burn"]) == (b["rounds"], b["burn"])


def test_the_reference_run_exercises_quotas_and_burn() -> None:
    ref = reference_run()
    refused = ref["refusals"] == Refusal.CLIENT_QUOTA
    assert refused.any() and set(WHO[refused].tolist()) == {0}  # only the prober is ever refused
    assert (ref["labels"][WHO != 0] >= 0).all()  # every other query is answered
    assert (ref["outcomes"][refused] == bt.REFUSED).all() and (ref["labels"][refused] == -1).all()
    assert ref["rounds"][-1] == 5 and len(ref["burn"]) == 5 * 6  # six windows of 100 per round of 600
    # each client whose queries are refused in a round fired exactly once in it, answered, before them
    rounds = np.asarray(ref["rounds"])
    for r in range(1, 6):
        for w in range(3):
            mine = np.flatnonzero((rounds == r) & np.equal(WHO, w))
            fired, refused_ = mine[ref["fired"][mine]], mine[ref["refusals"][mine] == Refusal.CLIENT_QUOTA]
            assert fired.size == (refused_.size > 0) or (fired.size == 1 and refused_.size == 0)
            if refused_.size:
                assert ref["labels"][fired[0]] >= 0 and fired[0] < refused_[0]
                assert np.array_equal(refused_, mine[mine > fired[0]])
    assert [(r, w) for r, w, _ in ref["burn"]] == [(r, w) for r in range(1, 6) for w in range(6)]


@settings(max_examples=25, deadline=None)
@given(cuts=st.lists(st.integers(1, N - 1), max_size=25))
def test_any_batching_gives_identical_answers_and_releases(cuts: list[int]) -> None:
    assert same(answer_in_batches(client_predictor(), POINTS, CLIENTS, cuts), reference_run())


@settings(max_examples=20, deadline=None)
@given(stops=st.lists(st.integers(1, N - 1), min_size=1, max_size=6),
       cuts=st.lists(st.integers(1, N - 1), max_size=10), how=st.sampled_from(["bytes", "parts"]))
def test_save_restore_at_any_point_continues_identically(stops: list[int], cuts: list[int], how: str) -> None:
    p = client_predictor()
    bounds = [0, *sorted(set(stops)), N]
    parts = []
    for lo, hi in itertools.pairwise(bounds):
        parts.append(answer_in_batches(p, POINTS[lo:hi], CLIENTS[lo:hi], [c - lo for c in cuts if lo < c < hi]))
        if how == "bytes":
            p = codec.loads(codec.dumps(p))  # type: ignore[assignment]
        else:
            pts = p.reservoir_points(0, p.reservoir_filled)
            p = Predictor.from_parts(codec.unpack(codec.pack(p.round_part())),
                                     codec.unpack(codec.pack(p.live_part())), pts)
    whole = {k: (np.concatenate([q[k] for q in parts]) if k in ARRAYS
                 else [x for q in parts for x in q[k]]) for k in parts[0]}
    assert same(whole, reference_run())


def test_answer_all_gives_the_same_answers_and_releases() -> None:
    res = client_predictor().answer_all(POINTS, CLIENTS)
    ref = reference_run()
    assert np.array_equal(res.labels, ref["labels"]) and np.array_equal(res.refusals, ref["refusals"])
    assert res.burn.tolist() == ref["burn"] and res.consumed == N


def test_str_and_bytes_name_the_same_client_and_one_id_means_the_whole_batch() -> None:
    swapped = [c.encode() if isinstance(c, str) else c.decode() if isinstance(c, bytes) else c for c in CLIENTS]
    assert same(answer_in_batches(client_predictor(), POINTS, swapped, [700, 1900]), reference_run())
    one, many = client_predictor(), client_predictor()
    a = one.answer(POINTS[:400], "prober")
    b = many.answer(POINTS[:400], ["prober"] * 400)
    assert np.array_equal(a.labels, b.labels) and codec.dumps(one) == codec.dumps(many)
    anon, nones = client_predictor(), client_predictor()
    assert np.array_equal(anon.answer(POINTS[:400]).refusals, nones.answer(POINTS[:400], [None] * 400).refusals)


def test_a_round_whose_prober_is_refused_runs_to_its_end_and_transitions() -> None:
    p = client_predictor()
    res = p.answer(np.full(600, 0.5), "prober")
    assert res.consumed == 600 and p.phase is Phase.TRANSITION_DUE  # refused queries take their slots
    assert (res.refusals == Refusal.CLIENT_QUOTA).sum() > 400 and p.tops_in_round < 100
    assert p.reservoir_filled == p.spec.m_D  # D-hat keeps its positions, refused or not
    p.transition()
    assert p.answer(np.full(10, 0.5), "prober").refusals.tolist() == [0] * 10  # a new round, a new quota


def test_the_round_halting_test_still_rules_over_quotas() -> None:
    """Many clients each under their share can still reach the round's threshold: it pauses for all
    until the round's end."""
    p = client_predictor(quotas={"share": 1.0, "eps": 1.0}, halt_threshold=40, c=60)
    who = [f"c{i % 50}" for i in range(300)]
    res = p.answer(np.full(300, 0.5), who)
    assert p.phase is Phase.PAUSED and (res.refusals[-10:] == Refusal.ROUND_PAUSED).all()
    assert res.consumed == 300 and not res.quota_fired[-10:].any()
    assert int(p._live.quota.table.tops.sum()) == p.tops_in_round  # type: ignore[union-attr]
    late = p.answer(np.full(3, 0.1), "late")
    assert late.refusals.tolist() == [Refusal.ROUND_PAUSED] * 3 and late.quota_fired.tolist() == [False] * 3


def test_a_halt_inside_a_batch_leaves_the_same_state_as_stopping_there() -> None:
    """The client table and the streams stop at the halting query: a batch that runs past the halt
    leaves the state a batch ending at the halt leaves (the late clients are not in the table)."""
    over: dict[str, Any] = {"quotas": {"share": 1.0, "eps": 1.0}, "halt_threshold": 40, "c": 60}
    p = client_predictor(**over)
    who = [f"c{i}" for i in range(600)]
    res = p.answer(np.full(600, 0.5), who)
    k = int((res.refusals != Refusal.ROUND_PAUSED).sum())
    assert 0 < k < 600 and p.phase is Phase.TRANSITION_DUE
    q = client_predictor(**over)
    q.answer(np.full(k, 0.5), who[:k])
    assert q.phase is Phase.PAUSED
    q.answer(np.full(600 - k, 0.5), who[k:])  # the rest of the round, refused while paused
    assert codec.dumps(p) == codec.dumps(q)
    assert p._live.quota.table.size == k  # type: ignore[union-attr]


# -- schedules and states ----------------------------------------------------------------------------------


def test_quotas_off_keeps_the_schedule_and_state_bytes() -> None:
    s = schedule("target-charged")
    assert "quotas" not in s.to_dict() and "burn" not in s.to_dict() and not s.clients
    p = predictor("target-charged")
    res = p.answer(POINTS[:100])
    assert res.quota_fired.size == 0 and res.burn.shape == (0, 3)
    st_ = p.state()
    assert st_["format"] == FORMAT and "quota" not in st_["live"] and "burn" not in st_["live"]


def test_quota_and_burn_settings_round_trip_and_tag_the_state() -> None:
    s = schedule("target-charged", quotas=QUOTAS, burn=BURN)
    assert Schedule.from_dict(s.to_dict()) == s and s.to_dict()["quotas"] == QUOTAS and s.to_dict()["burn"] == BURN
    p = client_predictor()
    p.answer(POINTS[:100], CLIENTS[:100])
    st_ = p.state()
    assert st_["format"] == FORMAT_CLIENTS and {"quota", "burn"} <= set(st_["live"])
    assert codec.dumps(codec.loads(codec.dumps(p))) == codec.dumps(p)


@pytest.mark.parametrize(("field", "value", "match"), [
    ("quotas", {"share": 0.0, "eps": 1.0}, "share"),
    ("quotas", {"share": 1.5, "eps": 1.0}, "share"),
    ("quotas", {"share": 0.5, "eps": -1.0}, "eps"),
    ("quotas", {"share": 0.5}, "needs"),
    ("quotas", {"share": 0.5, "eps": 1.0, "cap": 3}, "unknown"),
    ("quotas", {"share": "half", "eps": 1.0}, "number"),
    ("quotas", [0.5, 1.0], "object"),
    ("quotas", {"share": 0.5, "eps": 1e-13}, "scale"),
    ("burn", {"window": 0, "eps": 1.0}, "window"),
    ("burn", {"window": 10.5, "eps": 1.0}, "integer"),
    ("burn", {"window": 10, "eps": float("inf")}, "eps"),
    ("burn", {"window": 10}, "needs"),
])
def test_bad_quota_and_burn_settings_are_refused(field: str, value: Any, match: str) -> None:
    d = schedule("target-charged").to_dict()
    d[field] = value
    with pytest.raises(InvalidSchedule, match=match):
        Schedule.from_dict(d)


def test_quotas_and_burn_need_the_target_charged_design() -> None:
    for extra in ({"quotas": QUOTAS}, {"burn": BURN}):
        with pytest.raises(InvalidSchedule, match="target-charged design only"):
            Schedule.from_dict({**schedule("paper").to_dict(), **extra})


def corrupt(p: Predictor, edit: Any) -> dict[str, Any]:
    st_ = p.state()
    edit(st_)
    return st_


def _set(path: tuple[str, ...], value: Any) -> Any:
    def edit(d: dict[str, Any]) -> None:
        for key in path[:-1]:
            d = d[key]
        d[path[-1]] = value
    return edit


@pytest.mark.parametrize(("name", "edit"), [
    ("tag /5 with quotas on", _set(("format",), FORMAT)),
    ("no quota part", lambda d: d["live"].pop("quota")),
    ("no burn part", lambda d: d["live"].pop("burn")),
    ("client tops do not add up", _set(("live", "quota", "table", "tops"), np.array([999, 0, 0]))),
    ("unsorted keys", _set(("live", "quota", "table", "keys"), np.array([3, 2, 1], dtype=np.uint64))),
    ("short arrays", _set(("live", "quota", "table", "rho"), np.zeros(1, np.int64))),
    ("negative tops", _set(("live", "quota", "table", "tops"), np.array([-1, 0, 0]))),
    ("quota noise of another scale", lambda d: d["live"]["quota"]["noise"].update(scale=[3, 1])),
    ("burn window over-full", _set(("live", "burn", "tops"), 10**6)),
    ("burn noise of another scale", lambda d: d["live"]["burn"]["noise"].update(scale=[3, 1])),
    ("burn part malformed", _set(("live", "burn"), {"tops": "x"})),
])
def test_corrupt_quota_and_burn_states_are_refused(name: str, edit: Any) -> None:
    p = client_predictor()
    p.answer(POINTS[:150], CLIENTS[:150])
    assert p._live.quota is not None and p._live.quota.table.size == 3
    with pytest.raises(CorruptState):
        Predictor.from_state(corrupt(p, edit))


def test_a_quota_state_on_a_schedule_without_quotas_is_refused() -> None:
    p = client_predictor()
    p.answer(POINTS[:150], CLIENTS[:150])
    st_ = p.state()
    st_["schedule"] = schedule("target-charged").to_dict()
    with pytest.raises(CorruptState):
        Predictor.from_state(st_)


# -- client ids --------------------------------------------------------------------------------------------


def test_client_keys_are_fixed() -> None:
    """Keys seed each client's noise and index the stored table: part of the state format."""
    assert cl.client_key(None) == cl.ANONYMOUS_KEY == 0x9F47CD3D8E208BB3
    assert cl.client_key("a") == cl.client_key(b"a") == 0x1B2EEB601C64633B
    assert cl.client_key(b"") == 0x96852F60A3824364  # an empty id is a named client, not the anonymous one
    assert len({cl.client_key(x) for x in (None, "", "a", "b", b"ab", "\u00e9")}) == 6


@pytest.mark.parametrize("bad", [[1] * 5, [b"a", 2.5, None, "x", "y"], [["a"]] * 5, 7, [b"a"] * 4,
                                 np.array([["a"] * 5])])
def test_bad_client_ids_are_refused_without_quoting_them(bad: Any) -> None:
    p = client_predictor()
    before = codec.dumps(p)
    with pytest.raises(InvalidInput) as err:
        p.answer(POINTS[:5], bad)
    assert "2.5" not in str(err.value) and codec.dumps(p) == before


def test_without_quotas_clients_are_not_read_but_a_wrong_length_is_an_error() -> None:
    a, b = predictor("target-charged"), predictor("target-charged")
    assert np.array_equal(a.answer(POINTS[:50], [object()] * 50).labels, b.answer(POINTS[:50]).labels)
    with pytest.raises(InvalidInput, match="entries"):
        a.answer(POINTS[:5], ["x"] * 4)
