"""The generic private learner (Kasiviswanathan-Lee-Nissim-Raskhodnikova-Smith 2008): the
exponential mechanism over a hypothesis class on a finite floating-point domain, sampled exactly,
served as an everlasting predictor (docs/privacy/learner.md).

    from everlast.engine.learner import PrivateLearner
    m = PrivateLearner.fit("thresholds", x, y, epsilon=1.0)   # randomness: 256 bits of OS entropy
    m.answer(queries).labels
    t = PrivateLearner.fit({"name": "trees", "d": 2, "depth": 3}, x2, y2, epsilon=1.0)   # depth-3 trees

Never pass a guessable ``seed`` outside tests (docs/privacy/learner.md 2): the hypothesis is readable
from free queries, so a seed from a small set lets an adversary re-run the fit and tell neighbouring
training sets apart.
"""

from everlast.engine.learner.domain import Domain
from everlast.engine.learner.hypothesis import CLASSES, Hypothesis, hypothesis_count
from everlast.engine.learner.model import FORMAT, MECHANISM, PrivateLearner

__all__ = ["CLASSES", "FORMAT", "MECHANISM", "Domain", "Hypothesis", "PrivateLearner", "hypothesis_count"]
