"""engine.design: the Design value, noise_plan's exact integers and refusals, and RoundNoise's
streams and draw order."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from everlast.engine.concepts import random_order
from everlast.engine.design import (
    DEFAULT,
    MAX_COUNT,
    MAX_D_HAT,
    MAX_QUERIES,
    PAPER,
    QUERY_BLOCK,
    RETIRED,
    THRESHOLD_BLOCK,
    Design,
    Halting,
    Purpose,
    RoundNoise,
    capacity_problem,
    client_generator,
    generator,
    noise_plan,
    query_block,
)
from everlast.engine.errors import CorruptState, InvalidSchedule
from everlast.engine.noise import NoiseStream
from everlast.engine.schedule import RoundSpec, Schedule, design_of
from tests.engine.helpers import spec

# -- Design ---------------------------------------------------------------------------------------


def test_the_two_designs() -> None:
    assert Design.parse("noisy", "none") == DEFAULT == Design.named("target-charged")
    assert Design.parse("paper", "per-top") == PAPER == Design.named("paper")
    assert (DEFAULT.name, PAPER.name) == ("target-charged", "paper")
    assert DEFAULT.query_private and DEFAULT.target_charged
    assert not PAPER.query_private and not PAPER.target_charged
    for d in (DEFAULT, PAPER):
        assert Design.parse(**d.to_dict()) == d
        assert json.loads(json.dumps(d.to_dict())) == d.to_dict()


def test_plain_strings_are_coerced_to_the_enums() -> None:
    """Regression: Design("noisy", "none") compared equal to DEFAULT but was not target_charged."""
    d = Design("noisy", "none")  # type: ignore[arg-type]
    assert d == DEFAULT and d.target_charged and d.halting is Halting.NOISY and d.to_dict() == DEFAULT.to_dict()
    with pytest.raises(InvalidSchedule, match="unknown design"):
        Design("sometimes", "none")  # type: ignore[arg-type]


@pytest.mark.parametrize(("halting", "restarts", "retired"), [
    ("never", "none", "never"), ("never", "stateless", "never"), ("noisy", "private", "private"),
    ("paper", "private", "private"), ("noisy", "stateless", "stateless"), ("paper", "stateless", "stateless"),
])
def test_retired_values_give_the_retirement_message(halting: str, restarts: str, retired: str) -> None:
    with pytest.raises(InvalidSchedule) as info:
        Design.parse(halting, restarts)
    assert str(info.value) == RETIRED[retired]
    assert "retired" in str(info.value) and "docs/privacy/genericbbl.md 9" in str(info.value)


@pytest.mark.parametrize(("halting", "restarts"), [("paper", "none"), ("noisy", "per-top")])
def test_unpaired_values_name_the_designs(halting: str, restarts: str) -> None:
    with pytest.raises(InvalidSchedule, match=r"the designs are target-charged.*paper"):
        Design.parse(halting, restarts)


@pytest.mark.parametrize(("halting", "restarts"), [("sometimes", "none"), (None, "none"), ("noisy", 3),
                                                   ("x" * 500, "none")])
def test_unknown_values_are_refused_with_a_short_message(halting: Any, restarts: Any) -> None:
    with pytest.raises(InvalidSchedule, match="unknown design") as info:
        Design.parse(halting, restarts)
    assert len(str(info.value)) < 300


def test_named_refuses_unknown_names() -> None:
    with pytest.raises(InvalidSchedule, match="known: target-charged, paper"):
        Design.named("private-restarts")


def test_schedules_name_their_design() -> None:
    s = spec("target-charged")
    base = {"rounds": [s.to_dict()]}
    assert design_of({}) == DEFAULT
    assert design_of({"design": "paper"}) == PAPER
    assert design_of({"halting": "paper", "restarts": "per-top"}) == PAPER
    assert design_of({"design": "target-charged", "halting": "noisy"}) == DEFAULT
    with pytest.raises(InvalidSchedule, match="contradicts"):
        design_of({"design": "paper", "restarts": "none"})
    with pytest.raises(InvalidSchedule, match="retired"):
        design_of({"halting": "never"})
    sched = Schedule.from_dict(base)
    assert sched.design == DEFAULT and sched.halting == "noisy" and sched.restarts == "none"
    again = Schedule.from_dict(json.loads(json.dumps(sched.to_dict())))
    assert again == sched
    p = Schedule((spec("paper"),), design=PAPER)
    assert Schedule.from_dict(json.loads(json.dumps(p.to_dict()))) == p


@pytest.mark.parametrize("field", ["restart_eps", "restart_threshold", "block_cap"])
def test_retired_round_fields_name_the_retired_design(field: str) -> None:
    d = {**spec("target-charged").to_dict(), field: 1.0}
    with pytest.raises(InvalidSchedule, match="retired private-restarts design"):
        RoundSpec.from_dict(d)


@pytest.mark.parametrize(("over", "match"), [
    ({"halt_eps": None, "halt_threshold": None}, "needs halt_eps and halt_threshold"),
    ({"halt_eps": None}, "positive halt_eps"),
    ({"halt_eps": -1.0}, "positive halt_eps"),
    ({"halt_threshold": None}, r"halt_threshold in \[1, c\]"),
    ({"halt_threshold": 601}, r"halt_threshold in \[1, c\]"),
    ({"halt_threshold": 0}, r"halt_threshold in \[1, c\]"),
    ({"delta_bt": 1.5}, "delta_bt"),
])
def test_target_charged_rounds_need_their_halting_test(over: dict[str, Any], match: str) -> None:
    s = RoundSpec(**{**spec("target-charged").to_dict(), **over})
    with pytest.raises(InvalidSchedule, match=match):
        Schedule((s,))


def test_the_paper_design_needs_delta_bt() -> None:
    s = RoundSpec(**{**spec("paper").to_dict(), "delta_bt": None})
    with pytest.raises(InvalidSchedule, match="delta_bt"):
        Schedule((s,), design=PAPER)


# -- noise_plan -----------------------------------------------------------------------------------


def raw(**over: Any) -> RoundSpec:
    """A RoundSpec built directly (no Schedule validation), target-charged fields included."""
    return RoundSpec(**{**spec("target-charged").to_dict(), **over})


def exact_band(T: int, gamma: float) -> tuple[int, int]:
    """lo = ceil(T (1/2 - g)), hi = floor(T (1/2 + g)) for g = a/b (the float, exactly), in integers."""
    g = Fraction(gamma)
    a, b = g.numerator, g.denominator
    return -((-T * (b - 2 * a)) // (2 * b)), (T * (b + 2 * a)) // (2 * b)


@settings(max_examples=300, deadline=None)
@given(T=st.one_of(st.integers(1, 10_000), st.integers(1 << 53, MAX_COUNT)),
       gamma=st.floats(1e-6, 0.4999, allow_nan=False))
def test_thresholds_are_the_exact_integers(T: int, gamma: float) -> None:
    lo, hi = exact_band(T, gamma)
    s = raw(T=T, gamma=gamma, c=MAX_COUNT, halt_threshold=1)
    if hi < lo:
        with pytest.raises(InvalidSchedule, match="band holds no vote count"):
            noise_plan(DEFAULT, s)
        return
    for design in (DEFAULT, PAPER):
        plan = noise_plan(design, s)
        assert (plan.lo, plan.hi, plan.band, plan.T) == (lo, hi, hi - lo, T)
        assert type(plan.lo) is int and type(plan.hi) is int


def test_float_arithmetic_would_be_wrong_above_2_to_the_53() -> None:
    """A case where T (1/2 - gamma) in floats rounds to the wrong integer: the plan has the exact one."""
    T, gamma = (1 << 60) - 1, 0.1
    lo, hi = exact_band(T, gamma)
    assert math.ceil(T * (0.5 - gamma)) != lo and math.floor(T * (0.5 + gamma)) != hi
    plan = noise_plan(DEFAULT, raw(T=T, gamma=gamma, c=MAX_COUNT, halt_threshold=1))
    assert (plan.lo, plan.hi) == (lo, hi)


@pytest.mark.parametrize(("T", "gamma", "lo", "hi"), [
    (50, 0.1, 20, 30), (100, 0.05, 45, 55), (4, 0.25, 1, 3), (3000, 0.1, 1200, 1800), (7, 0.1, 3, 4),
])
def test_thresholds_by_hand(T: int, gamma: float, lo: int, hi: int) -> None:
    plan = noise_plan(DEFAULT, raw(T=T, gamma=gamma))
    assert (plan.lo, plan.hi) == (lo, hi)


def test_band_defaults_to_alpha() -> None:
    assert noise_plan(DEFAULT, raw(T=50, gamma=None, alpha=0.2)).lo == 15


def test_scales_are_the_floats_exactly() -> None:
    s = raw(eps_bt=0.3, halt_eps=0.7, halt_threshold=250, c=600)
    tc = noise_plan(DEFAULT, s)
    assert (tc.query, tc.threshold, tc.halt_query, tc.halt_threshold) == (
        Fraction(1.0 / 0.3), None, Fraction(4.0 / 0.7), Fraction(2.0 / 0.7))
    assert (tc.c, tc.c0) == (600, 250) and type(tc.c0) is int
    p = noise_plan(PAPER, s)
    assert (p.query, p.threshold, p.halt_query, p.halt_threshold, p.c0) == (
        Fraction(6.0 / 0.3), Fraction(2.0 / 0.3), None, None, None)


def test_counts_at_the_limits_are_accepted() -> None:
    plan = noise_plan(DEFAULT, raw(T=MAX_COUNT, R=MAX_QUERIES, c=MAX_COUNT, halt_threshold=MAX_COUNT, m_D=MAX_D_HAT))
    assert plan.c == plan.c0 == MAX_COUNT == 1 << 60 and MAX_QUERIES == 1 << 62
    assert MAX_D_HAT == random_order.MAX_N  # the transition orders D-hat with random_order


@pytest.mark.parametrize(("over", "match"), [
    ({"T": MAX_COUNT + 1}, "2\\^60"),
    ({"T": 0}, "T = 0"),
    ({"R": MAX_QUERIES + 1}, "2\\^62"),
    ({"c": 0}, "c = 0"),
    ({"c": MAX_COUNT + 1}, "c = "),
    ({"eps_bt": 2.0**21}, "noise scale"),  # 1/eps0 = 2^-21
    ({"eps_bt": 2.0**-41}, "noise scale"),  # 2^41
    ({"halt_eps": 2.0**23}, "noise scale"),  # 2/eps_h = 2^-22
    ({"halt_eps": 2.0**-39}, "noise scale"),  # 4/eps_h = 2^41
    ({"halt_threshold": 12.5}, "halt_threshold must be an integer"),
    ({"halt_threshold": math.inf}, "halt_threshold must be an integer"),
    ({"halt_threshold": True}, "halt_threshold must be an integer"),
    ({"halt_threshold": 0}, "halt_threshold must lie"),
    ({"halt_threshold": MAX_COUNT + 1}, "halt_threshold must lie"),
    ({"halt_eps": None}, "needs halt_eps and halt_threshold"),
    ({"T": 1, "gamma": 1e-3, "lam": 1}, "band holds no vote count"),
])
def test_noise_plan_refuses_what_it_cannot_run_exactly(over: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidSchedule, match=match):
        noise_plan(DEFAULT, raw(**over))


@pytest.mark.parametrize(("over", "match"), [({"eps_bt": 6 * 2.0**21}, "noise scale"),
                                            ({"eps_bt": 2.0**-39}, "noise scale")])
def test_paper_scales_are_checked_too(over: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidSchedule, match=match):
        noise_plan(PAPER, raw(**over))


def test_schedules_refuse_unrunnable_rounds_naming_the_round() -> None:
    good = spec("target-charged")
    bad = RoundSpec(**{**good.to_dict(), "eps_bt": 2.0**21})
    with pytest.raises(InvalidSchedule, match=r"round 2: .*noise scale"):
        Schedule((good, bad))
    with pytest.raises(InvalidSchedule, match="halt_threshold must be an integer"):
        RoundSpec.from_dict({**good.to_dict(), "halt_threshold": 12.5})
    assert RoundSpec.from_dict({**good.to_dict(), "halt_threshold": 300.0}).halt_threshold == 300


# -- RoundNoise -----------------------------------------------------------------------------------

PLANS = {"target-charged": (DEFAULT, noise_plan(DEFAULT, spec("target-charged"))),
         "paper": (PAPER, noise_plan(PAPER, spec("paper")))}
ENTROPY = 0x1234_5678_9ABC_DEF0_1122_3344


def test_purposes_are_part_of_the_format() -> None:
    assert [(p.name, p.value) for p in Purpose] == [
        ("SAMPLING", 0), ("QUERY", 1), ("THRESHOLD", 2), ("HALT_QUERY", 3), ("HALT_THRESHOLD", 4), ("ORDER", 5),
        ("QUOTA_QUERY", 6), ("QUOTA_THRESHOLD", 7), ("BURN", 8)]
    assert (QUERY_BLOCK, THRESHOLD_BLOCK) == (32768, 1024)


def test_one_independent_stream_per_round_and_purpose() -> None:
    firsts = {(r, p): int(generator(ENTROPY, r, p).integers(0, 1 << 62)) for r in (1, 2, 3) for p in Purpose}
    assert len(set(firsts.values())) == len(firsts)
    assert int(generator(ENTROPY, 2, Purpose.QUERY).integers(0, 1 << 62)) == firsts[(2, Purpose.QUERY)]


def test_one_independent_stream_per_round_and_client() -> None:
    """A client's quota threshold stream (spawn key (round, purpose, client key)) is its own: distinct
    from every other client's, round's and purpose's, and the same on every call."""
    keys = (0, 1, 2**63, 2**64 - 1)
    firsts = {(r, k): int(client_generator(ENTROPY, r, Purpose.QUOTA_THRESHOLD, k).integers(0, 1 << 62))
              for r in (1, 2) for k in keys}
    plain = {int(generator(ENTROPY, r, p).integers(0, 1 << 62)) for r in (1, 2) for p in Purpose}
    assert len(set(firsts.values())) == len(firsts) and not set(firsts.values()) & plain
    again = client_generator(ENTROPY, 2, Purpose.QUOTA_THRESHOLD, 2**63).integers(0, 1 << 62)
    assert int(again) == firsts[(2, 2**63)]


@pytest.mark.parametrize("name", list(PLANS))
def test_round_noise_draws_from_the_round_streams_with_the_plan_scales(name: str) -> None:
    design, plan = PLANS[name]
    rn, first = RoundNoise.start(design, plan, ENTROPY, 3)

    def stream(purpose: Purpose, scale: Fraction | None, block: int) -> NoiseStream:
        assert scale is not None
        return NoiseStream.fresh(generator(ENTROPY, 3, purpose), scale, block)

    a, b, _ = rn.per_query(100)
    assert np.array_equal(a, stream(Purpose.QUERY, plan.query, query_block(plan.R)).take(100)[0])
    if design.target_charged:
        assert b is not None and rn.threshold is None
        assert np.array_equal(b, stream(Purpose.HALT_QUERY, plan.halt_query, query_block(plan.R)).take(100)[0])
        assert first == int(stream(Purpose.HALT_THRESHOLD, plan.halt_threshold, 1).take(1)[0][0])
        with pytest.raises(InvalidSchedule, match="no threshold noise"):
            rn.next_threshold()
    else:
        assert b is None and rn.halt_query is None
        mus = stream(Purpose.THRESHOLD, plan.threshold, THRESHOLD_BLOCK).take(4)[0]
        assert first == int(mus[0])
        got = []
        for _ in range(3):
            mu, rn = rn.next_threshold()
            got.append(mu)
        assert got == [int(m) for m in mus[1:]]
    other, _ = RoundNoise.start(design, plan, ENTROPY, 4)
    assert not np.array_equal(other.per_query(100)[0], a)


Op = tuple[str, int]


def replay(rn: RoundNoise, ops: list[Op]) -> tuple[list[int], list[int], list[int], RoundNoise]:
    qs: list[int] = []
    hs: list[int] = []
    mus: list[int] = []
    for kind, n in ops:
        if kind == "q":
            a, b, rn = rn.per_query(n)
            qs += a.tolist()
            hs += [] if b is None else b.tolist()
        else:
            mu, rn = rn.next_threshold()
            mus.append(mu)
    return qs, hs, mus, rn


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(list(PLANS)),
       ops=st.lists(st.one_of(st.tuples(st.just("q"), st.integers(0, 9000)), st.tuples(st.just("mu"), st.just(1))),
                    max_size=8),
       stop=st.integers(0, 8), via_json=st.booleans())
def test_draw_order_is_independent_of_batching_and_restores(name: str, ops: list[Op], stop: int,
                                                            via_json: bool) -> None:
    design, plan = PLANS[name]
    if design.target_charged:
        ops = [o for o in ops if o[0] == "q"]
    rn, _ = RoundNoise.start(design, plan, ENTROPY, 1)
    n = sum(k for kind, k in ops if kind == "q")
    k = sum(1 for kind, _ in ops if kind == "mu")
    # the whole sequence in one call per stream
    whole_q, whole_h, _ = rn.per_query(n)
    whole_mu = [int(m) for m in rn.threshold.take(k)[0]] if rn.threshold is not None else []
    # in the given batches, saved and restored (codec-like round trip) at ``stop``
    q1, h1, m1, mid = replay(rn, ops[:stop])
    d = mid.to_dict()
    d = json.loads(json.dumps(d)) if via_json else d
    q2, h2, m2, _ = replay(RoundNoise.from_dict(design, plan, d), ops[stop:])
    assert q1 + q2 == whole_q.tolist()
    assert h1 + h2 == ([] if whole_h is None else whole_h.tolist())
    assert m1 + m2 == whole_mu


def test_round_noise_from_dict_refuses_mismatches() -> None:
    design, plan = PLANS["target-charged"]
    rn, _ = RoundNoise.start(design, plan, ENTROPY, 1)
    good = rn.to_dict()
    RoundNoise.from_dict(design, plan, good)
    other = noise_plan(DEFAULT, raw(eps_bt=0.25))
    with pytest.raises(CorruptState, match="scales"):
        RoundNoise.from_dict(design, other, good)
    pdesign, pplan = PLANS["paper"]
    with pytest.raises(CorruptState, match="scales"):
        RoundNoise.from_dict(pdesign, pplan, good)
    for broken in ({k: v for k, v in good.items() if k != "query"}, {**good, "halt_query": 5},
                   {**good, "query": {**good["query"], "pos": 10**9}}):
        with pytest.raises(CorruptState):
            RoundNoise.from_dict(design, plan, broken)


def test_query_block_fits_the_round_and_is_a_power_of_two() -> None:
    assert query_block(1) == 256 and query_block(600) == 1024 and query_block(1024) == 1024
    assert query_block(1025) == 2048 and query_block(10**12) == QUERY_BLOCK
    for R in (1, 255, 256, 257, 5000, 40_000, 2**62):
        b = query_block(R)
        assert b & (b - 1) == 0 and 256 <= b <= QUERY_BLOCK and (b >= R or b == QUERY_BLOCK)


def test_a_d_hat_beyond_2_to_32_points_is_certified_but_not_run() -> None:
    """capacity_problem is about what one engine holds, not exactness: noise_plan accepts the round,
    the engine's schedule refuses it with the reason."""
    big = raw(R=2**40, m_D=MAX_D_HAT + 1)
    noise_plan(DEFAULT, big)
    assert "m_D = 4294967297" in capacity_problem(big) and capacity_problem(raw()) == ""
    with pytest.raises(InvalidSchedule, match="2\\^32"):
        Schedule((big,), repeat_last=False)


def test_every_design_has_its_round_noise_and_its_fields() -> None:
    """Design behaviour is dispatched on the design: the engine's one registry has every design, each
    entry under its own key (the other layers' tables: tests/engine/test_design_registry.py)."""
    from everlast.engine import design as dz

    assert {Design.named(n) for n in dz._NAMES.values()} == set(dz.SPECS)
    assert all(spec.design == d for d, spec in dz.SPECS.items())
