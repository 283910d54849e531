"""Dagan-Feldman (2020), Corollary 1: single-query private prediction from a uniformly stable learner
plus a random label flip, implemented for thresholds c_t(x) = 1[x >= t] on the reals.

Per query x, with fresh randomness (Section 3.1, algorithm A^sta, then "Prediction privacy via
stability"):
  1. draw n0 indices I of the training set S (n = |S|), independently and uniformly (the paper
     draws a subset of size n0 without replacement; the proof below only needs eta = P[i* drawn]
     and that, given i* not drawn, S_I has the same law under S and S' -- both hold -- and i.i.d.
     draws keep the answers exactly independent of how queries are batched);
  2. H_{S_I}: one threshold per distinct dichotomy of the distinct points of S_I -- the cuts between
     consecutive distinct points, represented by midpoints, plus -inf (all ones) and +inf (all zeros);
     a function of S_I only;
  3. the exponential mechanism over H_{S_I} with score -(errors on the whole of S), sensitivity 1,
     parameter gamma: P[h] proportional to exp(-gamma err_S(h) / 2) (Lemma 4);
  4. output h(x), flipped with probability rho (the paper takes rho = alpha).

Per-query privacy (substitution of example i*; the proof of Lemma 7 made exact). Let
eta = P[i* in I] = 1 - (1 - p_max)^{n0}, where p_max is the largest probability of one index under
our index sampler (1/n up to 2^-52; see ``index_inclusion``). Given i* not in I, S_I = S'_I and the
exponential mechanism gives a(x) <= e^gamma a'(x) for the pre-flip probability of any label; given
i* in I, anything. So a = (1-eta) a_out + eta a_in with a_out <= e^gamma a'_out, and the released
label has probability rho + (1 - 2 rho) a. The ratio
    [rho + (1-2rho)((1-eta) min(1, e^gamma u) + eta)] / [rho + (1-2rho)(1-eta) u],  u in [0, 1],
is a ratio of affine functions up to u = e^-gamma and decreasing after, so its supremum is at
u = 0 or u = e^-gamma:
    eps0 = ln max( 1 + (1-2rho) eta / rho,  (1 - rho) / (rho + (1-2rho)(1-eta) e^-gamma) ).
This is at most the paper's ln(1 + (e^gamma - 1 + eta)/rho) (Lemma 7's additive stability
e^gamma - 1 + n0/n divided by the floor rho on every label's probability). Pure (eps0, 0)-DP per query.

Over queries: Corollary 1 is a single-query guarantee. Fresh randomness per query makes k answers
the adaptive composition of k (eps0, 0)-DP mechanisms (``peers.accounting``: basic, advanced,
optimal); the peer answers the largest k the tightest certifies for (epsilon, delta), then refuses.

Queries: an answer depends only on S, its own query and its own fresh randomness; no querier's
point leaks to others (``protects_queries``).

Cost per query: O(n0 log n) (a sort of the n0 indices and binary searches in the sorted S),
vectorized over blocks of queries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from everlast.engine.concepts import ConceptClass
from everlast.engine.rng import open_unit
from everlast.peers import accounting
from everlast.peers.base import F64, I8, I64, BudgetedPeer, PrivacyAccounting, streams, training_set
from everlast.peers.design import require_thresholds

_BLOCK_ELEMENTS = 1 << 20
"""Bound on (queries x n0) per vectorized block (memory only)."""


# --- the math, as pure functions ---------------------------------------------------------------


def index_inclusion(n: int, n0: int) -> float:
    """eta = P[a given index is among n0 draws] = 1 - (1 - p_max)^n0, with p_max the largest
    probability of one index under ``floor(u n)``, u uniform on the 2^52-point grid of
    ``engine.rng.open_unit``: each index is hit by an interval of at most ceil(2^52 / n) + 1 grid
    points (the +1 absorbs the rounding of u * n), so p_max = (ceil(2^52 / n) + 1) / 2^52."""
    p_max = (math.ceil(2.0**52 / n) + 1) / 2.0**52
    return -math.expm1(n0 * math.log1p(-p_max)) if p_max < 1.0 else 1.0


def per_query_epsilon(gamma: float, eta: float, rho: float) -> float:
    """eps0 = ln max(1 + (1-2rho) eta / rho, (1-rho) / (rho + (1-2rho)(1-eta) e^-gamma)) (module docstring)."""
    if not (0.0 < rho < 0.5):
        raise ValueError("the flip probability must be in (0, 1/2)")
    r0 = 1.0 + (1.0 - 2.0 * rho) * eta / rho
    r1 = (1.0 - rho) / (rho + (1.0 - 2.0 * rho) * (1.0 - eta) * math.exp(-gamma))
    return math.log(max(r0, r1))


def paper_per_query_epsilon(gamma: float, eta: float, rho: float) -> float:
    """The paper's looser form: ln(1 + (e^gamma - 1 + eta) / rho)."""
    return math.log1p((math.expm1(gamma) + eta) / rho)


def answer_probability(x_sorted: F64, prefix_ones: I64, idx: I64, gamma: float, q: float) -> float:
    """P[pre-flip answer = 1 | I = idx] for one query q: exactly, for tests (brute-force enumeration
    of index tuples uses it). ``x_sorted`` is S sorted, ``prefix_ones[k]`` the ones among its first k."""
    t, valid = _candidates(x_sorted[np.sort(idx)][None, :])
    err = _errors(x_sorted, prefix_ones, t)[0]
    logw = np.where(valid[0], -0.5 * gamma * err, -np.inf)
    w = np.exp(logw - logw.max())
    return float(w[q >= t[0]].sum() / w.sum())


def _candidates(sub_sorted: F64) -> tuple[F64, np.ndarray[Any, np.dtype[np.bool_]]]:
    """Thresholds of H_{S_I} per row: -inf, the midpoints between consecutive subset points, +inf;
    a cut between equal points is invalid (it repeats a dichotomy)."""
    rows, m = sub_sorted.shape
    lo, hi = sub_sorted[:, :-1], sub_sorted[:, 1:]
    mid = lo * 0.5 + hi * 0.5
    mid = np.where(mid > lo, mid, hi)  # a point in (lo, hi]: 1[x >= t] splits lo from hi
    t = np.concatenate([np.full((rows, 1), -np.inf), mid, np.full((rows, 1), np.inf)], axis=1)
    valid = np.ones((rows, m + 1), dtype=bool)
    valid[:, 1:m] = hi > lo
    return t, valid


def _errors(x_sorted: F64, prefix_ones: I64, t: F64) -> I64:
    """Errors on S of 1[x >= t]: ones below t plus zeros at or above t (binary search in sorted S)."""
    n = x_sorted.size
    below = np.searchsorted(x_sorted, t, side="left")
    ones_below = prefix_ones[below]
    zeros_above = (n - below) - (prefix_ones[-1] - ones_below)
    out: I64 = (ones_below + zeros_above).astype(np.int64)
    return out


@dataclass(frozen=True, slots=True)
class DFParams:
    n0: int
    """Indices drawn per query (the subset defining the cover)."""
    gamma: float
    """Exponential-mechanism parameter."""
    rho: float
    """Flip probability."""


class DaganFeldman(BudgetedPeer):
    """Fresh subset + exponential mechanism + flip per query; ``privacy.max_queries`` answers, then refusal."""

    name = "dagan_feldman"

    def __init__(
        self,
        concept: ConceptClass,
        x: Any,
        y: Any,
        *,
        params: DFParams,
        epsilon: float,
        delta: float,
        seed: int | None = None,
    ) -> None:
        require_thresholds(concept, "the Dagan-Feldman peer")
        if not (params.n0 >= 1 and params.gamma > 0.0 and 0.0 < params.rho < 0.5):
            raise ValueError("need n0 >= 1, gamma > 0 and a flip probability in (0, 1/2)")
        xs, ys = training_set(concept, x, y)
        order = np.argsort(xs, kind="stable")
        self.concept = concept
        self.params = params
        self.n = int(xs.size)
        self._xs = xs[order]
        self._prefix = np.concatenate([[0], np.cumsum(ys[order].astype(np.int64))])
        self._g = streams(seed, ("mechanism",))["mechanism"]
        self.eta = index_inclusion(self.n, params.n0)
        self.eps0 = per_query_epsilon(params.gamma, self.eta, params.rho)
        self.budget, _ = accounting.max_queries(self.eps0, epsilon, delta)
        comp = accounting.compose(self.budget, self.eps0, delta)
        used = comp.best[0]
        self._answered = 0
        self._privacy = PrivacyAccounting(
            epsilon=comp.best[1] if self.budget > 0 else 0.0,
            delta=delta,
            protects_queries=True,
            note=(
                f"Training set: each answer is ({self.eps0:.3g}, 0)-DP (Dagan-Feldman 2020, Lemma 7 and "
                f"Corollary 1, made exact: subset inclusion {self.eta:.3g}, exponential mechanism "
                f"{params.gamma:.3g}, flip {params.rho:.3g}); a single-query guarantee, so {self.budget} "
                f"answers with fresh randomness are composed adaptively by the {used} accountant to "
                f"({comp.best[1]:.4g}, {delta:.3g}), then every query is refused. Queries: no answer "
                f"depends on another query."
            ),
            max_queries=self.budget,
            per_query_epsilon=self.eps0,
            accountants=comp.as_pairs(),
            accountant_used=used,
            extra=(("n0", float(params.n0)), ("gamma", params.gamma), ("rho", params.rho), ("eta", self.eta)),
        )

    def answer(self, x: Any) -> I8:
        xs, k, out = self._admit(x)
        n0 = self.params.n0
        step = max(1, _BLOCK_ELEMENTS // (n0 + 2))
        for s in range(0, k, step):
            e = min(k, s + step)
            out[s:e] = self._answer_block(xs[s:e])
        self._answered += k
        return out

    def _answer_block(self, q: F64) -> I8:
        """Steps 1-4 for a block of queries; n0 + 2 uniforms per query, in query order."""
        b = q.size
        n0 = self.params.n0
        u = open_unit(self._g, b * (n0 + 2)).reshape(b, n0 + 2)
        idx = np.minimum((u[:, :n0] * self.n).astype(np.int64), self.n - 1)
        sub = np.sort(self._xs[idx], axis=1)
        t, valid = _candidates(sub)
        err = _errors(self._xs, self._prefix, t)
        logw = np.where(valid, -0.5 * self.params.gamma * err.astype(np.float64), -np.inf)
        w = np.exp(logw - logw.max(axis=1, keepdims=True))
        c = np.cumsum(w, axis=1)
        pick = (c < (u[:, n0] * c[:, -1])[:, None]).sum(axis=1)
        pick = np.minimum(pick, t.shape[1] - 1)
        th = t[np.arange(b), pick]
        label = (q >= th).astype(np.int8)
        flip = u[:, n0 + 1] < self.params.rho
        res: I8 = np.where(flip, 1 - label, label).astype(np.int8)
        return res
