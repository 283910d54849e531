"""Dwork-Feldman (2018) private prediction by subsample-and-aggregate with a noisy majority per query.

Mechanism. The training set is cut into T disjoint chunks of lam examples (positions of a
data-independent random permutation); one ERM classifier per chunk. For a query x with vote
count v(x) = #{classifiers saying 1}, the answer is

    label = 1[ v(x) + Z > T/2 ],     Z ~ Lap(1/eps0), fresh for every query.

Per-query privacy. Under substitution one example changes one chunk, so v(x) moves by at most 1
(sensitivity 1); v + Lap(1/eps0) is the Laplace mechanism, (eps0, 0)-DP (Dwork-McSherry-Nissim-
Smith 2006; Dwork-Roth 2014, Thm 3.6), and the label is a post-processing of it: (eps0, 0)-DP.
Dwork-Feldman 2018 analyse subsample-and-aggregate with a noisy aggregate of the votes; the
Laplace count compared with T/2 is our choice of that aggregate, and the guarantee above is proved
here, not taken from their theorems. The Laplace draws are ``engine.rng.laplace`` (inverse CDF on
a 52-bit grid): the floating-point caveat of Mironov 2012 applies. The peers are comparison rows and
never serve; the engine itself draws exact discrete Laplace noise (docs/privacy/genericbbl.md 8).

Over queries. The querier is adaptive, so k answers are the k-fold adaptive composition of
(eps0, 0)-DP mechanisms, accounted by ``peers.accounting``: basic (k eps0), advanced (DRV10),
optimal (KOV15, exact for the dominating randomized-response pair) and the dp_accounting PLD of the
Laplace mechanism (k <= ``PLD_MAX_K``). The peer answers the largest k for which the tightest of
them certifies (epsilon, delta), then refuses every further query. The number k is fixed at
construction, before any query: it does not depend on the data or on the queries.

Queries: each answer depends only on the training set, its own query and its own noise; the
refusal point depends only on how many queries came before. So the answers given to others reveal
nothing about one querier's point (``protects_queries``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from everlast.engine.concepts import ConceptClass
from everlast.engine.rng import laplace
from everlast.peers import accounting
from everlast.peers.base import I8, BudgetedPeer, PrivacyAccounting, fit_ensemble, streams, training_set


class DworkFeldman(BudgetedPeer):
    """Noisy-majority private prediction, answering ``privacy.max_queries`` queries then refusing."""

    name = "dwork_feldman"

    def __init__(
        self,
        concept: ConceptClass,
        x: Any,
        y: Any,
        *,
        T: int,
        lam: int,
        eps_query: float,
        epsilon: float,
        delta: float,
        seed: int | None = None,
        pld_max_k: int = accounting.PLD_MAX_K,
    ) -> None:
        if not (eps_query > 0.0 and epsilon > 0.0 and 0.0 <= delta < 1.0):
            raise ValueError("need eps_query > 0, epsilon > 0 and 0 <= delta < 1")
        xs, ys = training_set(concept, x, y)
        g = streams(seed, ("partition", "noise"))
        self.concept = concept
        self.T = T
        self.lam = lam
        self.eps_query = eps_query
        self.ensemble = fit_ensemble(concept, xs, ys, T, lam, g["partition"])
        self._noise = g["noise"]
        self.budget, _ = accounting.max_queries(eps_query, epsilon, delta, "laplace", pld_max_k)
        comp = accounting.compose(self.budget, eps_query, delta, "laplace", pld_max_k)
        used = comp.best[0]
        self.composition = comp
        self._answered = 0
        self._privacy = PrivacyAccounting(
            epsilon=comp.best[1] if self.budget > 0 else 0.0,
            delta=delta,
            protects_queries=True,
            note=(
                f"Training set: each answer is the Laplace mechanism on the vote count (sensitivity 1 "
                f"under substitution), ({eps_query:.3g}, 0)-DP; {self.budget} answers composed adaptively "
                f"are ({comp.best[1]:.4g}, {delta:.3g})-DP by the {used} accountant, then every query is "
                f"refused. Queries: an answer depends only on the training set, its own query and fresh "
                f"noise, so no querier's point leaks to others."
            ),
            max_queries=self.budget,
            per_query_epsilon=eps_query,
            accountants=comp.as_pairs(),
            accountant_used=used,
            extra=(("T", float(T)), ("lam", float(lam))),
        )

    def answer(self, x: Any) -> I8:
        xs, k, out = self._admit(x)
        if k > 0:
            v = self.ensemble.votes(xs[:k]).astype(np.float64)
            z = laplace(self._noise, 1.0 / self.eps_query, k)
            out[:k] = (v + z > 0.5 * self.T).astype(np.int8)
            self._answered += k
        return out
