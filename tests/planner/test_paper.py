"""The paper's own schedule (section 5) and chain, checked by hand and against docs/notes/calibration.md (i).

docs/notes/calibration.md computes (i) with natural logs except inside lambda_i (log2): the planner's
default ``lambda_log="log2"`` reproduces it; ``"ln"`` is the other reading.
"""

from __future__ import annotations

import math

import pytest

from everlast.engine.planner import Targets, plan
from everlast.engine.planner.accountants import IDEALISED
from everlast.engine.planner.amplification import claim_2_7
from everlast.engine.planner.composition import claim_d1_bound
from everlast.engine.planner.paper import TAU, paper_n_formula, paper_schedule

DELTA = 1e-6

# docs/notes/calibration.md table (i): eps, alpha, T_1, lambda_1, |S_1|, R_1, c_1, n, gap, D.6
TABLE_I = [
    (1, 0.05, 2.06e19, 3899, 8.02e22, 2.05e27, 3.28e27, 1.21e25, 0.88, 0.07),
    (1, 0.1, 4.26e18, 1789, 7.62e21, 1.95e26, 6.25e26, 1.15e24, 0.91, 0.07),
    (2, 0.1, 2.03e18, 1789, 3.63e21, 4.64e25, 1.48e26, 7.37e23, 0.91, 0.19),
    (4, 0.2, 1.95e17, 815, 1.59e20, 1.02e24, 6.52e24, 1.19e23, 0.95, 1.45),
    (8, 0.1, 4.56e17, 1789, 8.17e20, 2.61e24, 8.36e24, 1.66e25, 0.92, 77.0),
]


def test_round_one_by_hand() -> None:
    eps, alpha, beta = 1.0, 0.1, 0.05
    a1, b1 = alpha / 2, beta / 2
    lam = (8 * math.log2(13 / a1) + 4 * math.log2(2 / b1)) / a1
    T = TAU * lam * math.log(1 / DELTA) * math.log(lam / (eps * a1 * b1 * DELTA)) ** 2 / (a1 * eps)
    R = 25600 * lam * T / eps
    c = 64 * a1 * R
    r = paper_schedule(eps, DELTA, alpha, beta).rounds[0]
    assert r.lam == pytest.approx(lam, rel=1e-12) and r.lam == pytest.approx(1789.3, abs=0.05)
    assert pytest.approx(T, rel=1e-12) == r.T
    assert pytest.approx(R, rel=1e-12) == r.R
    assert r.c == pytest.approx(c, rel=1e-12)
    assert r.eps_bt == pytest.approx(1 / (3 * math.sqrt(c * math.log(2 / DELTA))), rel=1e-12)
    assert r.delta_bt == pytest.approx(DELTA / (2 * c), rel=1e-12)


@pytest.mark.parametrize(("eps", "alpha", "T1", "lam1", "S1", "R1", "c1", "n", "gap", "d6"), TABLE_I)
def test_calibration_table_i(eps: float, alpha: float, T1: float, lam1: int, S1: float, R1: float,
                             c1: float, n: float, gap: float, d6: float) -> None:
    ps = paper_schedule(eps, DELTA, alpha, 0.05)
    r = ps.rounds[0]
    assert pytest.approx(T1, rel=6e-3) == r.T
    assert round(r.lam) == lam1
    assert r.S_size == pytest.approx(S1, rel=6e-3)
    assert pytest.approx(R1, rel=6e-3) == r.R
    assert r.c == pytest.approx(c1, rel=6e-3)
    assert ps.n_real == pytest.approx(n, rel=6e-3)
    assert r.gap_ratio == pytest.approx(gap, abs=0.006)
    assert ps.d6_ratios[0] == pytest.approx(d6, rel=0.03)
    assert ps.n_formula == pytest.approx(ps.n_real, rel=1e-9)  # "Initial input" closed form
    assert ps.n_required >= ps.n_real  # rounded up


def test_lambda_log_convention_is_an_option() -> None:
    ln = paper_schedule(1.0, DELTA, 0.1, 0.05, lambda_log="ln").rounds[0]
    assert ln.lam == pytest.approx((8 * math.log(260) + 4 * math.log(80)) / 0.05)
    assert paper_n_formula(1.0, DELTA, 0.1, 0.05, 1, lambda_log="ln") < paper_n_formula(
        1.0, DELTA, 0.1, 0.05, 1)


def test_paper_chain_on_the_papers_schedule() -> None:
    p = plan(Targets(epsilon=1.0, accounting="paper"))
    c = p.certificate
    # the numbers are the paper's lemmas for its idealised mechanism; the engine could not run the
    # schedule anyway (T_1 = 4.3e18 is beyond what it counts exactly)
    assert c.describes == IDEALISED and c.design == "paper"
    assert p.schedule is None and not c.runnable and "2^60" in c.not_runnable_reason
    steps = {s.name: s for s in c.steps}
    comp1 = steps["BT composition, round 1"]
    # Observation 2 at the paper's eps'_1, delta'_1: 0.479 (Claim D.1 bounds it by 0.487, not 1)
    assert comp1.epsilon == pytest.approx(0.4791, abs=2e-4)
    assert comp1.epsilon <= claim_d1_bound(DELTA)
    assert comp1.delta == pytest.approx(DELTA, rel=1e-6)
    # by hand: Phi_1 = E_1 + r_S (3 + e^3); eps_S = r_1 (3 + e^Phi_1) (Claim 2.7 at r-hat)
    r = p.rounds[0]
    r_s = r.m_S / r.labeled_size
    r_1 = r.labeled_size / p.n_required
    phi = comp1.epsilon + r_s * (3 + math.e**3)
    assert r_1 <= 1 / (3 + math.e**5) and r_s <= 1 / (3 + math.e**5)
    assert c.epsilon_training == pytest.approx(claim_2_7(r_1, phi, 0.0)[0], rel=1e-9)
    assert c.epsilon_training == pytest.approx(0.0322, abs=2e-4)
    assert c.delta_training == pytest.approx(4 * r_1 * DELTA, rel=1e-6)
    # the query chain is never certified (Claim E.6's in-round step)
    assert not c.query_private and math.isinf(c.epsilon_queries)
    assert c.epsilon_queries_conditional < 1.0


def test_paper_at_eps_8_is_outside_its_theorem_and_not_runnable() -> None:
    p = plan(Targets(epsilon=8.0, accounting="paper"))
    assert p.n_required == pytest.approx(1.66e25, rel=6e-3)
    assert p.schedule is None and "exactly" in p.not_runnable_reason
    assert any("Theorem 5.1" in w for w in p.warnings)
    assert any("D.6" in w for w in p.warnings)
