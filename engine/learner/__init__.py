"""The generic private learner (Kasiviswanathan-Lee-Nissim-Raskhodnikova-Smith 2008): the
exponential mechanism over a hypothesis class on a finite floating-point domain, sampled exactly,
served as an everlasting predictor (docs/PRIVACY.md section 16).

    from engine.learner import PrivateLearner
    m = PrivateLearner.fit("thresholds", x, y, epsilon=1.0, seed=7)
    m.answer(queries).labels
"""

from engine.learner.domain import Domain
from engine.learner.hypothesis import CLASSES, Hypothesis, hypothesis_count
from engine.learner.model import FORMAT, MECHANISM, PrivateLearner

__all__ = ["CLASSES", "FORMAT", "MECHANISM", "Domain", "Hypothesis", "PrivateLearner", "hypothesis_count"]
