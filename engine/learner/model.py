"""The generic private learner as a served mechanism (``engine.serving.Servable``).

``PrivateLearner.fit`` releases one hypothesis by the exponential mechanism (score = minus the
training errors, weights exp(-eps errors / 2), sampled exactly: ``engine.learner.sampler``,
``engine.learner.stumps``), or a depth-k tree by one such mechanism per node (``engine.learner.tree``,
Theorem T1), and answers every query with it, forever:
  * the training set is (eps, 0)-DP under substitution (docs/privacy/learner.md 2);
  * the queries are (0, 0)-DP: an answer depends only on the fixed hypothesis and its own query;
  * it never halts or transitions (round 0, ``capacity`` None) and queries cannot change it; it
    refuses only points outside the declared domain, as a function of the point alone
    (``outside_domain`` says which, so that a server can reject them one by one).
The training set is not kept. Answers are a pure function of (hypothesis, query): any batching, any
save/restore, any replay gives the same labels.

Checkpoint parts: ``round_part()`` (format ``everlast-learner/1``: class, domain, epsilon, n and the
hypothesis -- a secret of the model), ``live_part()`` (the count of answered queries). No reservoir.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from everlast.engine import phases
from everlast.engine.concepts import ConceptClass
from everlast.engine.concepts import from_spec as concept_from_spec
from everlast.engine.concepts.base import check_labels
from everlast.engine.errors import CorruptState, InvalidInput
from everlast.engine.learner.domain import Domain
from everlast.engine.learner.exact import Bits, BitSource
from everlast.engine.learner.hypothesis import CLASSES, Hypothesis
from everlast.engine.learner.release import sample
from everlast.engine.learner.sampler import MAX_EPS_ERRORS
from everlast.engine.learner.tree import (
    DEFAULT_DEPTH,
    MAX_DEPTH,
    Tree,
    level_epsilons,
    sample_tree,
    uses_split_score,
)
from everlast.engine.learner.validate import Validation, holdout_size, measure, split
from everlast.engine.phases import Phase
from everlast.engine.serving import Answers, RoundInfo

FORMAT = "everlast-learner/1"
MECHANISM = "private-learner"


def _positive_int(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, int | np.integer) and int(v) >= 1


def concept_spec(concept: str | dict[str, Any], d: int | None = None, depth: int | None = None) -> dict[str, Any]:
    """Normalize ``"thresholds"`` / ``{"name": "stumps", "d": 10}`` / ``{"name": "trees", "d": 2,
    "depth": 3}`` to a spec; raises ``InvalidInput``."""
    spec: dict[str, Any] = {"name": concept} if isinstance(concept, str) else dict(concept)
    name = spec.get("name")
    if name not in CLASSES:
        raise InvalidInput(f"the private learner supports the classes {', '.join(CLASSES)}; not {name!r}")
    if name in ("stumps", "trees"):
        dim: Any = spec.get("d", d)
        if not _positive_int(dim):
            raise InvalidInput(f"{name} need a dimension d >= 1")
        if name == "stumps":
            return {"name": "stumps", "d": int(dim)}
        k: Any = spec.get("depth", depth if depth is not None else DEFAULT_DEPTH)
        if not _positive_int(k) or int(k) > MAX_DEPTH:
            raise InvalidInput(f"trees need a depth between 1 and {MAX_DEPTH}")
        return {"name": "trees", "d": int(dim), "depth": int(k)}
    return {"name": name}


def validator_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The concept class whose point validation the learner's class shares (trees: stumps' R^d)."""
    return {"name": "stumps", "d": spec["d"]} if spec["name"] == "trees" else spec


MIN_EPSILON = 2.0**-1000
"""The least epsilon a fit accepts: a tree's level budgets are at least epsilon / 2^8 and the split
score's mechanism runs at epsilon_l / 256, an exact division only while the quotient is a normal double
(epsilon_l >= 2^-1014; docs/privacy/learner.md 8). Below, a subnormal quotient rounds, possibly up:
an overspend."""


def check_epsilon(epsilon: Any, n: int) -> float:
    try:
        eps = float(epsilon)
    except (TypeError, ValueError):
        raise InvalidInput("epsilon must be a number") from None
    if not (math.isfinite(eps) and eps > 0.0):
        raise InvalidInput("epsilon must be positive and finite")
    if eps < MIN_EPSILON:
        raise InvalidInput("epsilon must be at least 2^-1000 (a smaller one makes a tree's split budget subnormal)")
    if eps * max(n, 1) > MAX_EPS_ERRORS:
        raise InvalidInput(f"epsilon * n must be at most {MAX_EPS_ERRORS:g} (the exact sampler's range)")
    return eps


SEED_BITS = 256
"""OS entropy per generator when no seed is given (docs/privacy/learner.md 2)."""


def os_seed() -> np.random.SeedSequence:
    """``SEED_BITS`` bits of OS entropy in a pool of as many bits, for one PCG64 (whose state and
    increment keep 255 of them). numpy's default ``SeedSequence()`` draws 128 bits into a 128-bit pool:
    an interval's release exposes up to 126.9986 bits, a margin of one bit over such a seed
    (docs/privacy/learner.md 2). Two 128-bit reads of the OS generator (numpy reads it for us: the
    engine does no I/O of its own)."""
    hi, lo = np.random.SeedSequence().entropy, np.random.SeedSequence().entropy
    assert isinstance(hi, int) and isinstance(lo, int)
    return np.random.SeedSequence((hi << 128) | lo, pool_size=SEED_BITS // 32)


def _bits(seed: int | None) -> Bits:
    return Bits(np.random.Generator(np.random.PCG64(os_seed() if seed is None else seed)))


def node_bits(seed: int | None) -> Callable[[int], BitSource]:
    """A tree's bit sources. seed None: every node draws from its own generator on fresh OS entropy
    (``os_seed``), so each node's draw -- at most 65 + log2 d output bits on float64 (66 at d = 2) --
    has section 2's margin of docs/privacy/learner.md over its 255-bit seed, as one stump's has; a
    whole tree (462 bits at depth 3, d = 2) exceeds any one seed. Two assumptions stand under this
    (learner.md 2, 7, 8; computational): the nodes' seeds are independent only as far as the OS
    generator's outputs are (one kernel CSPRNG with a 256-bit key, which a deep tree outweighs), so
    that generator must be indistinguishable from uniform bits; and each node's sampler reads raw
    PCG64 words as fair bits, which section 2's margin argues only heuristically (a random-map model of
    PCG64, not a cryptographic generator). A seed (tests and benches on synthetic or public data; the
    daemon refuses one): one PCG64 for the whole tree, reproducible, and no privacy claim."""
    if seed is None:
        return lambda _node: _bits(None)
    shared = _bits(seed)
    return lambda _node: shared


class PrivateLearner:
    """One hypothesis released by the exponential mechanism; answers every query with it."""

    __slots__ = ("_answered", "_concept", "domain", "epsilon", "hypothesis", "n_train", "spec", "validation")

    mechanism = MECHANISM
    has_rounds = False
    answers_change_state = False
    """Answers are a function of the hypothesis and the query (the answered count is public
    bookkeeping, not read by any answer)."""

    def __init__(self, spec: dict[str, Any], domain: Domain, epsilon: float, n_train: int,
                 hypothesis: Hypothesis | Tree, answered: int = 0, validation: Validation | None = None) -> None:
        self.spec = spec
        self._concept: ConceptClass = concept_from_spec(validator_spec(spec))
        self.domain = domain
        self.epsilon = epsilon
        self.n_train = n_train
        self.hypothesis = hypothesis
        self._answered = answered
        self.validation = validation

    @classmethod
    def fit(cls, concept: str | dict[str, Any], x: Any, y: Any, *, epsilon: float,
            domain: Domain | dict[str, Any] | str | None = None, seed: int | None = None,
            d: int | None = None, depth: int | None = None, holdout: float = 0.0,
            beta: float = 0.05) -> PrivateLearner:
        """Run the exponential mechanism on the training set (x, y) and return the served learner.

        ``seed``: the root of the PCG64 generator; None (the default, and the only choice outside
        tests and benchmarks on synthetic or public data) draws 256 bits of OS entropy (``os_seed``;
        trees: 256 bits per node, ``node_bits``). The release is a deterministic function of (data,
        seed), and the hypothesis can be read back from free queries, so a guessable seed voids the
        guarantee, and a seeded fit carries no privacy claim (docs/privacy/learner.md 2, 8); each
        further fit on the same data spends another epsilon.
        Raises ``InvalidInput`` (naming fields or positions, never values) for a malformed call;
        nothing is kept of the training set. Trees: epsilon is split over the levels by
        ``tree.level_epsilons``, the score chosen by ``tree.uses_split_score`` of epsilon (Theorem T1).

        ``holdout``: the share of the training set held out for the validated certificate (Theorem V,
        docs/privacy/learner.md 10; 0: none). A uniform random subset of ``validate.holdout_size(n,
        holdout)`` records, drawn from the fit's own randomness before any record is read, is kept out
        of the fit; the released model's error count on it is released with discrete Laplace noise at
        the same epsilon and turned into an upper confidence bound at confidence 1 - ``beta``
        (``self.validation``). The two parts are disjoint: the whole release is (epsilon, 0)-DP under
        substitution (parallel composition)."""
        spec = concept_spec(concept, d, depth)
        cc = concept_from_spec(validator_spec(spec))
        dom = domain if isinstance(domain, Domain) else Domain.from_spec(domain)
        xs = cc.validate_points(x, "training")
        n = int(xs.shape[0])
        if n == 0:
            raise InvalidInput("training set is empty")
        ys = check_labels(y, n)
        eps = check_epsilon(epsilon, n)
        if not 0.0 < float(beta) < 1.0:
            raise InvalidInput("beta must lie in (0, 1)")
        pos = dom.positions(xs, "training")
        m = holdout_size(n, float(holdout))
        vbits = _bits(None) if seed is None else Bits(np.random.Generator(np.random.PCG64([int(seed), 0x7A11D])))
        held = split(n, m, vbits) if m else np.zeros(n, dtype=np.bool_)
        fit_pos, fit_y = (pos[~held], ys[~held]) if m else (pos, ys)
        n_fit = n - m
        h: Hypothesis | Tree
        if spec["name"] == "trees":
            levels = level_epsilons(eps, spec["depth"], n_fit, spec["d"], dom.size)
            h = sample_tree(fit_pos, fit_y, dom.lo_pos, dom.hi_pos, levels, node_bits(seed),
                            split_score=uses_split_score(eps))
        else:
            h = sample(spec["name"], fit_pos, fit_y, dom.lo_pos, dom.hi_pos, eps, _bits(seed))
        v = None
        if m:
            errors = int(np.count_nonzero(h.labels(pos[held]) != ys[held]))
            v = measure(errors, m, eps, float(beta), vbits)
        return cls(spec, dom, eps, n, h, validation=v)

    @property
    def n_fit(self) -> int:
        """The records the hypothesis was fitted on (n minus the holdout): public."""
        return self.n_train - (self.validation.m if self.validation is not None else 0)

    def constant(self) -> bool:
        """Whether the released model labels every point of the domain alike (public: a function of
        the release)."""
        h = self.hypothesis
        if isinstance(h, Tree):
            return h.constant(self.domain.lo_pos, self.domain.hi_pos, self.spec["d"])
        return h.constant(self.domain.lo_pos, self.domain.hi_pos)

    # -- Servable ------------------------------------------------------------------------------

    @property
    def point_dim(self) -> int:
        return self._concept.point_dim

    @property
    def phase(self) -> Phase:
        return Phase.ANSWERING

    @property
    def round(self) -> int:
        return 0

    @property
    def capacity(self) -> int | None:
        return None

    @property
    def answered(self) -> int:
        """Queries answered so far (public: a count of queries)."""
        return self._answered

    def round_info(self) -> RoundInfo | None:
        return None

    def outside_domain(self, x: Any) -> NDArray[np.bool_]:
        """Per query, whether it lies outside the declared domain (``answer`` would refuse the
        batch). Depends only on the queries and the public domain. Raises ``InvalidInput`` for
        NaN/inf or a wrong shape."""
        return self.domain.outside(self._concept.validate_points(x))

    def answer(self, x: Any, clients: Any = None) -> Answers:
        """Label every query with the released hypothesis. Raises ``InvalidInput`` (NaN/inf, wrong
        shape, a point outside the declared domain) with the learner unchanged. ``clients`` is not
        read: the learner has no budget a client could spend."""
        xs = self._concept.validate_points(x)
        labels = self.hypothesis.labels(self.domain.positions(xs))
        n = int(labels.shape[0])
        self._answered += n
        return Answers(labels=labels, outcomes=labels.copy(), round=0, consumed=n,
                       refusals=np.zeros(n, np.int8))

    def transition(self) -> None:
        """Never due: raises ``InvalidState`` (the learner has no rounds)."""
        phases.check(Phase.ANSWERING, "transition")

    @property
    def reservoir_filled(self) -> int:
        return 0

    def reservoir_points(self, start: int, end: int) -> NDArray[np.float64]:
        d = self.point_dim
        return np.zeros((0,) if d == 1 else (0, d), dtype=np.float64)

    def certificate(self) -> dict[str, Any]:
        """What the model certifies (docs/privacy/learner.md 2): public, no data."""
        return {"mechanism": MECHANISM, "epsilon_training": self.epsilon, "delta_training": 0.0,
                "epsilon_queries": 0.0, "delta_queries": 0.0, "neighbours": "substitution",
                "n": self.n_train, "concept": self.spec, "domain": self.domain.describe(),
                "lemma": ("Theorem T1, docs/privacy/learner.md 8 (one exponential mechanism per node, exact sampler)"
                          if self.spec["name"] == "trees" else
                          "Theorem L1, docs/privacy/learner.md (exponential mechanism, exact sampler)"),
                **({"validated": {**self.validation.to_dict(), "theorem": "Theorem V, docs/privacy/learner.md 10",
                                  "sentence": self.validation.sentence()}} if self.validation is not None else {})}

    # -- checkpoint ------------------------------------------------------------------------------

    def round_part(self) -> dict[str, Any]:
        """Fixed for the model's life. Holds the hypothesis: a secret, store it like a key."""
        return {"format": FORMAT, "mechanism": MECHANISM, "concept": dict(self.spec),
                "domain": self.domain.to_spec(), "epsilon": self.epsilon, "n": self.n_train,
                "hypothesis": self.hypothesis.to_dict(),
                **({"validation": self.validation.to_dict()} if self.validation is not None else {})}

    def live_part(self) -> dict[str, Any]:
        return {"round": 0, "answered": self._answered}

    @classmethod
    def from_parts(cls, round_part: dict[str, Any], live_part: dict[str, Any],
                   reservoir: NDArray[np.float64] | None) -> PrivateLearner:
        """Inverse of (``round_part``, ``live_part``); raises ``CorruptState``."""
        try:
            if round_part["format"] != FORMAT:
                raise CorruptState("checkpoint was written by an incompatible learner version")
            spec = concept_spec(dict(round_part["concept"]))
            dom = Domain.from_spec(round_part["domain"])
            n = int(round_part["n"])
            eps = check_epsilon(round_part["epsilon"], n)
            dim = spec.get("d", 1)
            raw = dict(round_part["hypothesis"])
            h: Hypothesis | Tree = (Tree.from_dict(raw, dom.lo_pos, dom.hi_pos, dim) if spec["name"] == "trees"
                                    else Hypothesis.from_dict(raw, dom.lo_pos, dom.hi_pos, dim))
            answered = int(live_part["answered"])
            val = round_part.get("validation")
            v = None if val is None else Validation.from_dict(dict(val))
        except CorruptState:
            raise
        except InvalidInput as exc:
            raise CorruptState(f"checkpoint is invalid: {exc}") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptState(f"state is malformed ({type(exc).__name__})") from None
        depth_ok = not isinstance(h, Tree) or h.depth == spec["depth"]
        if h.concept != spec["name"] or not depth_ok or n < 1 or answered < 0 or (v is not None and v.m >= n):
            raise CorruptState("checkpoint's hypothesis, class or counters do not fit together")
        if reservoir is not None and np.asarray(reservoir).size:
            raise CorruptState("the private learner keeps no reservoir")
        return cls(spec, dom, eps, n, h, answered, v)
