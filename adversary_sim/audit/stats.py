"""From guesses to an empirical lower bound on epsilon (Jagielski-Ullman-Oprea 2020; Nasr et al. 2021).

A mechanism M is (eps, delta)-DP in the game's sense (Definition 3.4) when, for every event E of the
adversary's view and both orders of the two worlds,

    P_1[E] <= e^eps P_0[E] + delta.

The adversary turns its view into a guess "world 1" (event E). Its false-positive rate
FPR = P_0[E] and false-negative rate FNR = P_1[not E] then force

    eps >= ln((1 - delta - FNR) / FPR)     and     eps >= ln((1 - delta - FPR) / FNR)

(the second is the same inequality for the complement event with the worlds swapped). The rates
are estimated from independent trials; replacing FPR and FNR by their Clopper-Pearson upper
confidence limits makes the bound hold with the stated confidence: each limit fails with
probability at most alpha/2, so both hold together with probability >= 1 - alpha (Bonferroni).

The guess is a threshold on a scalar score (the adversary's statistic, e.g. a log-likelihood
ratio). Choosing the threshold on the same trials that are then counted would bias the bound
upwards, so the trials of each world are split: a calibration part picks the threshold and the
direction, the disjoint evaluation part is counted (the standard "held-out" protocol).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

CALIBRATION_FRACTION = 1.0 / 3.0
"""Share of each world's trials used to choose the threshold (the rest are counted)."""


def clopper_pearson_upper(k: NDArray[np.int64] | int, n: int, alpha: float) -> NDArray[np.float64]:
    """One-sided (1 - alpha) Clopper-Pearson upper limit for a binomial rate with k successes in n
    trials: the (1 - alpha) quantile of Beta(k + 1, n - k); 1 when k = n."""
    kk = np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        up = stats.beta.ppf(1.0 - alpha, kk + 1.0, np.maximum(n - kk, 1e-300))
    return np.asarray(np.where(kk >= n, 1.0, up), dtype=np.float64)


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Two-sided (1 - alpha) Clopper-Pearson interval [lo, hi] for k successes in n trials."""
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha / 2.0, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1.0 - alpha / 2.0, k + 1, n - k))
    return lo, hi


def epsilon_from_rates(fpr: NDArray[np.float64] | float, fnr: NDArray[np.float64] | float,
                       delta: float) -> NDArray[np.float64]:
    """max(ln((1 - delta - FNR)/FPR), ln((1 - delta - FPR)/FNR)), floored at 0 (vectorized)."""
    a = np.asarray(fpr, dtype=np.float64)
    b = np.asarray(fnr, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        e1 = np.where((1.0 - delta - b) > 0, np.log(np.maximum(1.0 - delta - b, 1e-300)) - np.log(a), -np.inf)
        e2 = np.where((1.0 - delta - a) > 0, np.log(np.maximum(1.0 - delta - a, 1e-300)) - np.log(b), -np.inf)
    out = np.maximum(np.maximum(e1, e2), 0.0)
    return np.asarray(np.where(np.isnan(out), 0.0, out), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Bound:
    """The result of one test: guess "world 1" iff direction * (score - threshold) >= 0."""

    epsilon_lower_bound: float
    threshold: float
    direction: int
    """+1: guess world 1 for scores >= threshold; -1: for scores <= threshold."""
    false_positives: int
    false_negatives: int
    n0: int
    """World-0 trials counted (evaluation part)."""
    n1: int
    fpr: float
    fnr: float
    fpr_upper: float
    fnr_upper: float
    alpha: float
    """Total miscoverage of this bound (each rate's limit is taken at alpha/2)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "epsilon_lower_bound": self.epsilon_lower_bound,
            "threshold": self.threshold,
            "direction": self.direction,
            "false_positives": self.false_positives,
            "false_negatives": self.false_negatives,
            "eval_trials_world0": self.n0,
            "eval_trials_world1": self.n1,
            "fpr": self.fpr,
            "fnr": self.fnr,
            "fpr_upper": self.fpr_upper,
            "fnr_upper": self.fnr_upper,
            "confidence": 1.0 - self.alpha,
        }


def _counts(s0: NDArray[np.float64], s1: NDArray[np.float64], thr: NDArray[np.float64],
            direction: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """False positives (world 0 guessed 1) and false negatives (world 1 guessed 0) per threshold."""
    a0, a1 = np.sort(s0), np.sort(s1)
    if direction > 0:  # guess 1 iff s >= thr
        fp = a0.size - np.searchsorted(a0, thr, side="left")
        fn = np.searchsorted(a1, thr, side="left")
    else:  # guess 1 iff s <= thr
        fp = np.searchsorted(a0, thr, side="right")
        fn = a1.size - np.searchsorted(a1, thr, side="right")
    return fp.astype(np.int64), fn.astype(np.int64)


def choose_threshold(s0: NDArray[np.float64], s1: NDArray[np.float64], delta: float,
                     alpha: float) -> tuple[float, int]:
    """The threshold and direction maximizing the Clopper-Pearson bound on these (calibration)
    scores. Candidates: every observed score."""
    cand = np.unique(np.concatenate([s0, s1]))
    if cand.size == 0:
        return 0.0, 1
    best, thr, dirn = -1.0, float(cand[0]), 1
    for direction in (1, -1):
        fp, fn = _counts(s0, s1, cand, direction)
        e = epsilon_from_rates(clopper_pearson_upper(fp, s0.size, alpha / 2.0),
                               clopper_pearson_upper(fn, s1.size, alpha / 2.0), delta)
        i = int(np.argmax(e))
        if e[i] > best:
            best, thr, dirn = float(e[i]), float(cand[i]), direction
    return thr, dirn


def bound_at(s0: NDArray[np.float64], s1: NDArray[np.float64], threshold: float, direction: int,
             delta: float, alpha: float) -> Bound:
    """Count the fixed test on (evaluation) scores and turn it into a bound."""
    fp, fn = _counts(s0, s1, np.asarray([threshold]), direction)
    k0, k1 = int(fp[0]), int(fn[0])
    fpr_u = float(clopper_pearson_upper(k0, s0.size, alpha / 2.0))
    fnr_u = float(clopper_pearson_upper(k1, s1.size, alpha / 2.0))
    eps = float(epsilon_from_rates(fpr_u, fnr_u, delta))
    return Bound(
        epsilon_lower_bound=eps, threshold=threshold, direction=direction,
        false_positives=k0, false_negatives=k1, n0=int(s0.size), n1=int(s1.size),
        fpr=k0 / s0.size if s0.size else math.nan, fnr=k1 / s1.size if s1.size else math.nan,
        fpr_upper=fpr_u, fnr_upper=fnr_u, alpha=alpha,
    )


def audit_bound(scores0: NDArray[np.float64], scores1: NDArray[np.float64], delta: float, alpha: float,
                calibration_fraction: float = CALIBRATION_FRACTION) -> Bound:
    """Held-out protocol: the first ``calibration_fraction`` of each world's trials choose the test,
    the rest are counted. Trials are i.i.d., so taking the first ones is a valid split."""
    s0 = np.asarray(scores0, dtype=np.float64)
    s1 = np.asarray(scores1, dtype=np.float64)
    c0 = round(s0.size * calibration_fraction)
    c1 = round(s1.size * calibration_fraction)
    thr, direction = choose_threshold(s0[:c0], s1[:c1], delta, alpha)
    return bound_at(s0[c0:], s1[c1:], thr, direction, delta, alpha)


def max_bound_for_trials(n_eval: int, delta: float, alpha: float) -> float:
    """The largest bound n_eval evaluation trials per world can give (perfect separation): what a
    broken mechanism can be shown to violate at this trial count."""
    u = float(clopper_pearson_upper(0, n_eval, alpha / 2.0))
    return float(epsilon_from_rates(u, 0.0 + u, delta))
