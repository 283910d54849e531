"""Peers: the private-prediction methods a user would pick instead of everlast, each behind the same
"answer a stream of queries" interface (``peers.base.StreamPredictor``) with its own honest privacy
accounting for the training set.

Modules (one per peer):
  * ``nonprivate``      -- subsample-and-aggregate, plain majority (no privacy; the accuracy ceiling);
  * ``dwork_feldman``   -- Dwork-Feldman 2018: noisy (Laplace) majority per query, composed over queries;
  * ``sparse_vector``   -- Bassily-Thakurta-Thakkar 2018 style: sparse-vector gate on the distance to
                           instability, noiseless majority when stable, noisy majority when not;
  * ``private_learner`` -- Kasiviswanathan et al. 2008: one exponential-mechanism hypothesis over a grid;
  * ``dagan_feldman``   -- Dagan-Feldman 2020, Corollary 1: exponential mechanism over the cover of a
                           random subset, then a random label flip, fresh per query.
Shared pieces: ``accounting`` (composition), ``design`` (the accuracy rules that size each peer),
``sample_complexity``, ``evaluate`` (``run_peer``), ``registry`` (``build``) and ``everlast`` (the
engine's predictor behind the same interface).

Neighbouring relation throughout: training sets of the same size that differ in one example
(substitution, "replace one"), as in the everlast paper (Naor-Nissim-Stemmer-Yan 2023, Def. 3.4).
"""

from everlast.peers.base import PrivacyAccounting, StreamPredictor

__all__ = ["PrivacyAccounting", "StreamPredictor"]
