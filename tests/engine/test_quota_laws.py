"""The laws of what quotas and the burn-rate signal draw, through the serving path (``Predictor.answer``).

One round of a split-vote predictor (every query at 0.5 is a top, the count noise negligible), 3,000
clients sending 60 such queries each, one after the other, and the burn-rate signal on:

* a client's quota test fires at its first query j with j + xi'_j >= c0_q + rho'_k (its tops after j
  queries are j), so its number J of answered queries before the first refusal has the law
  P[J = j] = sum_rho P[rho'] prod_{i<j} P[xi' < c0_q + rho' - i] P[xi' >= c0_q + rho' - j], with
  xi' ~ DLap(4/eps_q) per query and rho' ~ DLap(2/eps_q) once per client: a chi-square test of the
  3,000 clients' J against it checks the scales, c0_q = ceil(share c0), and that rho' is drawn once
  per client (a fresh threshold per query would give another law);
* every window's release minus its true count of answered tops (known exactly from the outcomes)
  must be i.i.d. DLap(1/eps_b): a chi-square test over 18,000 windows, and a lag-one check that
  consecutive residuals are uncorrelated.

Tolerances: tests/engine/stats.py (family level 1e-6, Bonferroni over the checks).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

from everlast.engine import between_thresholds as bt
from tests.engine.helpers import client_predictor, split_vote
from tests.engine.stats import check_chisquare, check_mean, dlap_cdf, dlap_pmf

CLIENTS, EACH, C0_Q = 3000, 60, 30
EPS_Q, EPS_B, WINDOW = 1.0, 0.5, 10
CHECKS = 3


@functools.cache
def run() -> dict[str, Any]:
    c0 = 1 << 20  # the round never halts; share = 30 / 2^20 is exact in binary: c0_q = 30
    over: dict[str, Any] = {"R": 200_000, "m_D": 500, "c": c0, "halt_threshold": c0, "eps_bt": 50.0,
                            "halt_eps": 100.0}
    p = split_vote(client_predictor(seed=21, quotas={"share": C0_Q / c0, "eps": EPS_Q},
                                    burn={"window": WINDOW, "eps": EPS_B}, **over))
    assert p._round.quota is not None and p._round.quota.c0 == C0_Q
    who = np.repeat(np.arange(CLIENTS), EACH)
    names = [f"client-{k}" for k in who.tolist()]
    x = np.full(who.size, 0.5)
    labels, outcomes, burn = [], [], []
    for s in range(0, who.size, 6000):
        res = p.answer(x[s : s + 6000], names[s : s + 6000])
        labels.append(res.labels)
        outcomes.append(res.outcomes)
        burn.append(res.burn)
    out = np.concatenate(outcomes)
    assert set(np.unique(out).tolist()) <= {bt.TOP, bt.REFUSED} and p.tops_in_round == int((out == bt.TOP).sum())
    return {"who": who, "labels": np.concatenate(labels), "outcomes": out, "burn": np.concatenate(burn)}


@pytest.mark.statistical
def test_each_clients_quota_test_fires_with_the_above_threshold_law() -> None:
    r = run()
    answered = np.bincount(r["who"], weights=r["labels"] >= 0, minlength=CLIENTS).astype(np.int64)
    tx, tr = 4.0 / EPS_Q, 2.0 / EPS_Q
    probs = np.zeros(EACH + 1)  # probs[j]: fires after its j-th query; probs[EACH]: j >= EACH (or never)
    for rho in range(-int(60 * tr), int(60 * tr) + 1):
        alive = dlap_pmf(rho, tr)
        for j in range(1, EACH):
            fire = 1.0 - dlap_cdf(C0_Q + rho - j - 1, tx)
            probs[j] += alive * fire
            alive *= 1.0 - fire
        probs[EACH] += alive
    # J = answered count when the client was refused at all (J <= EACH - 1), else EACH
    obs = np.bincount(answered, minlength=EACH + 1)
    assert obs[0] == 0
    exp = probs * CLIENTS
    ok = np.flatnonzero(exp >= 20)
    lo, hi = int(ok[0]), int(ok[-1])
    cells_o = [int(obs[: lo + 1].sum()), *obs[lo + 1 : hi].tolist(), int(obs[hi:].sum())]
    cells_p = [float(probs[: lo + 1].sum()), *probs[lo + 1 : hi].tolist(), float(probs[hi:].sum())]
    check_chisquare(cells_o, cells_p, CHECKS, "quota firing time")


@pytest.mark.statistical
def test_burn_rate_releases_are_true_counts_plus_independent_discrete_laplace() -> None:
    r = run()
    n = r["outcomes"].size
    true = np.bincount(np.arange(n) // WINDOW, weights=r["outcomes"] == bt.TOP).astype(np.int64)
    rows = r["burn"]
    assert rows.shape == (n // WINDOW, 3) and (rows[:, 0] == 1).all()
    assert np.array_equal(rows[:, 1], np.arange(n // WINDOW))
    res = rows[:, 2] - true
    t = 1.0 / EPS_B
    edges = range(-8, 9)  # cells ..., -8 | -7 ... 7 | 8, ...
    obs = [int((res <= -8).sum()), *[int((res == z).sum()) for z in edges[1:-1]], int((res >= 8).sum())]
    probs = [dlap_cdf(-8, t), *[dlap_pmf(z, t) for z in edges[1:-1]], 1.0 - dlap_cdf(7, t)]
    check_chisquare(obs, probs, CHECKS, "burn-rate noise")
    # consecutive windows' noises are independent: the lag-one products have mean 0, sd = Var(Z)
    var = 2.0 * np.exp(-1.0 / t) / (1.0 - np.exp(-1.0 / t)) ** 2
    lag = (res[1:] * res[:-1]).astype(np.float64)
    check_mean(float(lag.mean()), 0.0, float(var), lag.size, CHECKS, "lag-one correlation of the burn noise")
