"""The privacy audit: its statistics, its vectorized BetweenThresholds, and its verdicts.

The verdict tests are the point of the audit (issue 5): with fixed seeds, the real engine never shows
a lower bound above the planner's claim, and each deliberately broken variant shows one above it.
Margins: the broken variants are separated perfectly or nearly so, so their bound is (close to) the
most the trial count allows; the trial counts are chosen so that this maximum clears the claim by
a wide margin (see each test)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adversary_sim.audit.fastbt import run_batch
from adversary_sim.audit.games import (
    HALT_C0,
    HALT_EPS,
    FlipAttack,
    HaltingAttack,
    RestartAttack,
    main_round,
    make_schedule,
    noisy_halting_round,
    restart_round,
)
from adversary_sim.audit.probe import ProbeLLR, _segment_tables
from adversary_sim.audit.restart import Game, WaitAndTest, play_one
from adversary_sim.audit.runner import resolve_attacks, run_audit
from adversary_sim.audit.stats import (
    audit_bound,
    clopper_pearson,
    clopper_pearson_upper,
    epsilon_from_rates,
    max_bound_for_trials,
)
from adversary_sim.audit.variants import NO_HALT_C, NO_NOISE_EPS, PlainRelabelThresholds, variant
from engine import between_thresholds as bt
from engine.concepts import Thresholds

# -- statistics ------------------------------------------------------------------------------------


def test_clopper_pearson_known_values() -> None:
    lo, hi = clopper_pearson(0, 10, 0.05)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / 10))
    lo, hi = clopper_pearson(5, 10, 0.05)
    assert lo == pytest.approx(0.187086, abs=1e-5) and hi == pytest.approx(0.812914, abs=1e-5)
    assert float(clopper_pearson_upper(10, 10, 0.025)) == 1.0


def test_epsilon_from_rates() -> None:
    assert float(epsilon_from_rates(0.5, 0.5, 0.0)) == 0.0
    assert float(epsilon_from_rates(0.01, 0.5, 0.0)) == pytest.approx(math.log(50))
    assert float(epsilon_from_rates(0.5, 0.01, 0.0)) == pytest.approx(math.log(50))
    assert float(epsilon_from_rates(0.01, 0.5, 0.4)) == pytest.approx(math.log(0.1 / 0.01))
    assert float(epsilon_from_rates(0.1, 0.2, 0.0)) == pytest.approx(max(math.log(0.8 / 0.1), math.log(0.9 / 0.2)))


def test_audit_bound_perfect_and_null() -> None:
    s0, s1 = np.zeros(300), np.ones(300)
    b = audit_bound(s0, s1, delta=1e-6, alpha=0.05)
    assert b.false_positives == b.false_negatives == 0 and b.n0 == b.n1 == 200
    assert b.epsilon_lower_bound == pytest.approx(max_bound_for_trials(200, 1e-6, 0.05))
    g = np.random.default_rng(0)
    null = audit_bound(g.normal(size=3000), g.normal(size=3000), delta=1e-6, alpha=0.05)
    assert null.epsilon_lower_bound < 0.2


@pytest.mark.statistical
def test_audit_bound_coverage_on_a_known_mechanism() -> None:
    """Randomized response with eps = 1: over 200 seeded audits the bound exceeds 1 at most ~5% of
    the time (it is a 95% lower confidence bound); here, with 400 trials per world, it never does."""
    eps = 1.0
    p = math.exp(eps) / (1 + math.exp(eps))
    over = 0
    for seed in range(200):
        g = np.random.default_rng(seed)
        s0 = (g.random(400) > p).astype(float)
        s1 = (g.random(400) < p).astype(float)
        over += audit_bound(s0, s1, delta=0.0, alpha=0.05).epsilon_lower_bound > eps
    assert over <= 10


# -- the vectorized BetweenThresholds equals the engine's ------------------------------------------


@pytest.mark.parametrize("c", [1, 3, None])
def test_fastbt_matches_engine_run(c: int | None) -> None:
    g = np.random.default_rng(1)
    n, k, T, eps, band = 40, 200, 1000, 0.9, 0.2
    q = np.where(g.random(n) < 0.5, 0.299, 0.301)
    nu = g.laplace(0, bt.query_noise_scale(eps, T), (n, k))
    mus = g.laplace(0, bt.threshold_noise_scale(eps, T), (n, k + 1))
    fast = run_batch(q, k, eps_bt=eps, T=T, band=band, c=c, nu=nu, mu_draws=mus)
    for i in range(n):
        it = iter(mus[i, 1:])
        r = bt.run(np.full(k, q[i]), nu[i], band=band, mu=float(mus[i, 0]), tops=0, c=c or 10**9,
                   draw_mu=lambda it=it: float(next(it)))
        assert np.array_equal(fast.outcomes[i, : r.answered], r.outcomes)
        assert np.all(fast.outcomes[i, r.answered :] == bt.REFUSED)
        assert bool(fast.halted[i]) == r.halted and int(fast.tops[i]) == r.tops


def test_probe_tables_are_probabilities() -> None:
    """Sum over m of P(m zeros then a 1) is 1 (a top eventually comes)."""
    top, cens = _segment_tables(-0.5, 2 / 0.9, 6 / 0.9, 2000)
    assert float(np.exp(top).sum()) == pytest.approx(1.0, abs=2e-3)
    assert cens[0] == pytest.approx(0.0, abs=1e-3)  # zero zeros, censored: probability 1 (quadrature)
    llr = ProbeLLR.build(0.299, 0.3, band=0.2005, eps_bt=0.9, T=1000, queries=50)
    lab = np.array([[0, 0, 1, -1, -1], [1, 0, 0, 0, 0]], dtype=np.int8)
    s = llr.scores(lab)
    assert s[0] == pytest.approx(llr.top[2])
    assert s[1] == pytest.approx(llr.top[0] + llr.censored[4])


# -- variants are inputs to the unmodified engine ----------------------------------------------------


def test_variants_change_inputs_only() -> None:
    nominal = make_schedule(main_round())
    assert variant("real").schedule(nominal) == nominal
    assert all(r.eps_bt == NO_NOISE_EPS for r in variant("no-noise").schedule(nominal).rounds)
    assert all(r.c == NO_HALT_C for r in variant("no-halt-limit").schedule(nominal).rounds)
    assert isinstance(variant("majority-relabel").concept(Thresholds()), PlainRelabelThresholds)
    with pytest.raises(ValueError, match="unknown variant"):
        variant("nope")


def test_plain_relabel_is_the_argmax_of_labelboost_scores() -> None:
    g = np.random.default_rng(2)
    xl = g.random(60)
    yl = (xl >= 0.4).astype(np.int8)
    yl[:5] ^= 1
    xu = g.random(30)
    plain = PlainRelabelThresholds().labelboost(xl, yl, xu, g)
    best = max(Thresholds().labelboost(xl, yl, xu, np.random.default_rng(s)).score for s in range(200))
    assert plain.score == best


def test_attack_resolution() -> None:
    assert [a.name for a in resolve_attacks("training", None)] == ["flip", "relabel"]
    assert [a.name for a in resolve_attacks("query", ["all"])] == ["chain", "halting", "restart"]
    assert [a.name for a in resolve_attacks("query", ["restart"], restarts="private")] == ["restart"]
    assert [a.name for a in resolve_attacks("query", ["halting"], "noisy", restarts="private")] == ["halting"]
    with pytest.raises(ValueError):
        resolve_attacks("training", ["halting"])
    with pytest.raises(ValueError, match="halting and restart attacks only"):
        resolve_attacks("query", ["chain"], restarts="private")


# -- verdicts (fixed seeds) ----------------------------------------------------------------------------


def _audit(game: str, v: str, attack: str, trials: int, **kw: object) -> dict[str, object]:
    out = run_audit(game, v, [attack], trials, seed=7, **kw)  # type: ignore[arg-type]
    (a,) = out["attacks"]  # type: ignore[misc]
    assert a["claimed_epsilon"] == out["claimed_epsilon"] and math.isfinite(a["claimed_epsilon"])
    return out


@pytest.mark.statistical
@pytest.mark.parametrize(("game", "attack"), [("training", "flip"), ("training", "relabel"), ("query", "chain")])
def test_real_engine_stays_below_the_claim(game: str, attack: str) -> None:
    """The real engine: the bound stays below the claim (in fact near 0: c = 1 top leaks little)."""
    out = _audit(game, "real", attack, 2000)
    assert not out["caught"]
    assert out["epsilon_lower_bound"] < 0.5 * out["claimed_epsilon"]  # type: ignore[operator]


@pytest.mark.statistical
@pytest.mark.parametrize(("game", "v", "attack", "trials"), [
    # perfect separation: bound = ln((1 - u)/u), u = CP limit of 0 in 400 -> 4.68 vs claim 1.97
    ("training", "no-noise", "flip", 1200),
    # thousands of tops instead of 1: near-perfect separation, bound ~4.6 vs 1.97
    ("training", "no-halt-limit", "flip", 1200),
    # world 0 reveals itself when the canary is in S-hat (10%), world 1 never: ~3.7 vs 1.97
    ("training", "majority-relabel", "relabel", 4800),
    # perfect separation through round 2: ln((1 - u)/u) with 1500 evaluation trials -> 6.0 vs 4.97
    ("query", "no-noise", "chain", 4500),
])
def test_broken_variants_are_caught(game: str, v: str, attack: str, trials: int) -> None:
    out = _audit(game, v, attack, trials)
    assert out["caught"]
    assert out["epsilon_lower_bound"] > out["claimed_epsilon"] + 0.8  # type: ignore[operator]


@pytest.mark.statistical
def test_halting_attack_breaks_the_conditional_query_claim() -> None:
    """Issue 8: against halting 'paper' with c < R the last query is refused exactly in world 1, so
    the bound is the most the trials allow (5.4 with 1200 per world), far above the conditional claim
    (3.6); with c >= R ('never') the same adversary learns nothing."""
    out = _audit("query", "real", "halting", 2400)
    assert out["claimed_kind"] == "conditional" and out["claimed_epsilon_proven"] == math.inf
    assert out["caught"] and out["epsilon_lower_bound"] > out["claimed_epsilon"] + 1.0  # type: ignore[operator]
    never = _audit("query", "real", "halting", 600, halting="never")
    assert never["epsilon_lower_bound"] == 0.0 and not never["caught"]


def test_noisy_halting_round_is_the_design_of_section_3_2() -> None:
    """eps_h = 1, c0 = 10, hard cap c = c0 + 1 + ceil((8/eps_h) ln(1/1e-9)) = 177 << R."""
    s = noisy_halting_round()
    assert (s.halt_eps, s.halt_threshold) == (HALT_EPS, float(HALT_C0)) == (1.0, 10.0)
    assert s.c == 10 + 1 + math.ceil(8 * math.log(1e9)) == 177 and 100 * s.c < s.R
    sc = HaltingAttack(halting="noisy").scenario()
    assert sc.schedule.halting == "noisy" and sc.schedule.rounds[0] == s
    with pytest.raises(ValueError):
        make_schedule(main_round(), "bogus")


@pytest.mark.statistical
def test_halting_attack_fails_against_noisy_halting() -> None:
    """Noisy halting (AboveThreshold on the top count, eps_h = 1): the same adversary, with the
    follow-up tops swept up to the hard cap (score: the halting time; the held-out third picks the
    best k), stays far below eps_h. The exact tail ratios of the halting time are at most ~0.42
    (10^4 games per world: e.g. P(refused after 0 follow-ups) .050 vs .070), and the Clopper-Pearson
    limits on 1333 evaluation games per world only lower that; seeds 0-4 give 0.00-0.15. Under
    'paper' the same games give 5.4 (test above)."""
    out = _audit("query", "real", "halting", 4000, halting="noisy")
    (a,) = out["attacks"]  # type: ignore[misc]
    assert out["claimed_kind"] == "in-round (noisy halting, AboveThreshold)"
    assert out["claimed_epsilon"] == HALT_EPS and out["claimed_delta"] < 1e-12  # type: ignore[operator]
    assert not out["caught"] and out["epsilon_lower_bound"] <= 0.5 * HALT_EPS  # type: ignore[operator]
    fk = a["fixed_k"]
    assert fk["k"] == HALT_C0 - 1 and fk["epsilon_lower_bound"] <= 0.5 * HALT_EPS
    # the halt is visible (the adversary's view has signal: world 1 halts about one query earlier) ...
    g = a["halting_game"]
    assert 0.3 < g["world0"]["mean_follow_ups_answered"] - g["world1"]["mean_follow_ups_answered"] < 1.5
    # ... but the hard cap never binds: every game halted before c follow-ups
    assert min(a["scores"]["edges"]) > -noisy_halting_round().c


def test_flip_attack_data_are_neighbours() -> None:
    a = FlipAttack()
    x0, y0 = a.data(0, 1)
    x1, y1 = a.data(1, 1)
    assert np.array_equal(x0, x1) and int((y0 != y1).sum()) == 1


# -- the restart attack (issue 8, query_privacy.md section 2) ----------------------------------------


def test_restart_round_is_the_research_configuration() -> None:
    """c = 2000, alpha = 0.05, T = 1.2 T_min: the band is W = alpha eps' T ~ 228 noise units."""
    s = restart_round()
    assert s.c == 2000 and s.alpha == 0.05
    assert s.band * s.eps_bt * s.T == pytest.approx(228, abs=1)
    p = restart_round("never", "private")
    assert p.c == p.R + 1 and (p.restart_eps, p.restart_threshold, p.block_cap) == (1.0, 5.0, 171)


def test_restart_game_replays_the_engine_exactly() -> None:
    """The game stops at the m-th zero by replaying a prefix; the view it scores is the engine's."""
    g = Game(restart_round("never", "per-top"), "never", "per-top")
    adv = WaitAndTest()
    a = play_one(g, adv, 1, np.random.default_rng(5))
    b = play_one(g, adv, 1, np.random.default_rng(5))
    assert a == b and a.n2 >= 0 and a.queries > adv.m
    stateless = Game(restart_round("never", "stateless"), "never", "stateless")
    o = play_one(stateless, WaitAndTest(z=4.0), 0, np.random.default_rng(1))
    assert o.n2 >= 0


def _restart(restarts: str, halting: str, trials: int, adv: WaitAndTest | None = None) -> dict[str, object]:
    out = run_audit("query", "real", ["restart"], trials, seed=7, halting=halting, restarts=restarts,
                    adversary=adv)
    (a,) = out["attacks"]  # type: ignore[misc]
    assert math.isfinite(a["claimed_epsilon"])
    return out


@pytest.mark.statistical
def test_restart_attack_breaks_per_top_restarts() -> None:
    """Per-top restarts, the paper's halting (c = 2000): P0(N2 >= 5) ~ 0.44, P1 ~ 0.025; with 1333
    evaluation games per world the bound is ~2.5 (expected 2.5 +- 0.15), far above the conditional
    claim (~1.04)."""
    out = _restart("per-top", "paper", 4000)
    assert out["claimed_kind"] == "conditional"
    assert out["caught"] and out["epsilon_lower_bound"] > 2.0  # type: ignore[operator]
    assert out["epsilon_lower_bound"] > out["claimed_epsilon"] + 0.8  # type: ignore[operator]


@pytest.mark.statistical
@pytest.mark.parametrize(("restarts", "adv"), [
    # the wait costs ~10x more tops under private restarts: the cheaper adversary of the
    # cross-check (m = 10, z = 0, theta = 3; against per-top it gets P0 .57 vs P1 .12)
    ("private", WaitAndTest(m=10, z=0.0, theta=3)),
    # with a fresh noise per query a run of 18 zeros at z = -1 never comes: probe lower (z = 4)
    ("stateless", WaitAndTest(z=4.0)),
])
def test_restart_attack_fails_against_repaired_restarts(restarts: str, adv: WaitAndTest) -> None:
    out = _restart(restarts, "never", 3000, adv)
    assert not out["caught"] and out["epsilon_lower_bound"] < 0.5  # type: ignore[operator]
    (a,) = out["attacks"]  # type: ignore[misc]
    assert a["restart_game"]["world0"]["no_test"] < 0.05


# -- the default design (noisy halting + private restarts): both attacks, proven in-round claim ------


def test_default_design_scenarios_run_the_default_design() -> None:
    """The halting attack's round gets the default design's restart test in its one-block form;
    the restart attack's round keeps its own (eps_r = 1, k0 = 5: the test fires)."""
    h = HaltingAttack(halting="noisy", restarts="private").scenario().schedule
    assert (h.halting, h.restarts) == ("noisy", "private")
    assert h.rounds[0].restart_threshold is not None and h.rounds[0].restart_threshold > h.rounds[0].c
    r = RestartAttack(halting="noisy", restarts="private").scenario().schedule
    assert (r.halting, r.restarts) == ("noisy", "private") and r.rounds[0].restart_threshold == 5.0


@pytest.mark.statistical
def test_halting_attack_fails_against_the_default_design() -> None:
    """Against noisy halting + private restarts the claim is Theorem Q's in-round step, proven:
    eps_h + eps_r = 1 + 1e-3; the halting attack's sweep stays far below it (as under noisy halting
    with per-top restarts: the halting time's tail ratios are at most ~e^0.42)."""
    out = _audit("query", "real", "halting", 4000, halting="noisy", restarts="private")
    assert out["claimed_kind"] == "proven (in-round step Q0, Theorem Q)"
    assert out["claimed_epsilon"] == pytest.approx(HALT_EPS + 1e-3)
    assert out["claimed_epsilon_proven"] == out["claimed_epsilon"]
    assert not out["caught"] and out["epsilon_lower_bound"] <= 0.5 * HALT_EPS  # type: ignore[operator]


@pytest.mark.statistical
def test_restart_attack_fails_against_the_default_design() -> None:
    """noisy + private (eps_h = 0.1, eps_r = 1): claim eps_h + eps_r = 1.1, proven; the cheaper
    adversary (m = 10, z = 0, theta = 3) nearly always gets to its test, and learns nothing
    (P(N2 >= 3) ~ 0.31 in both worlds)."""
    out = _restart("private", "noisy", 3000, WaitAndTest(m=10, z=0.0, theta=3))
    assert out["claimed_kind"] == "proven (in-round step Q0, Theorem Q)"
    assert out["claimed_epsilon"] == pytest.approx(1.1)
    assert not out["caught"] and out["epsilon_lower_bound"] < 0.5  # type: ignore[operator]
    (a,) = out["attacks"]  # type: ignore[misc]
    assert a["restart_game"]["world0"]["no_test"] < 0.05
