"""The interface every concept class implements, and the exponential-mechanism helpers they share.

A concept class supplies three things to GenericBBL:
  * ``fit``: a non-private ERM learner run on T disjoint chunks at once (vectorized over chunks);
  * an ``Ensemble`` of the T fitted classifiers whose ``votes`` counts, for a batch of queries,
    how many classifiers say 1 (fast: sub-linear in T per query);
  * ``labelboost``: LabelBoost's step 4 (paper, Appendix C.1; Beimel-Nissim-Stemmer 2021): the
    exponential mechanism with epsilon = 1 and sensitivity 1 over **all distinct dichotomies** of
    the class on the distinct points of S-hat o D-hat, score = agreements with the labeled part,
    i.e. P[h] = exp(score(h)/2) / Z. Sampled exactly: every dichotomy is enumerated implicitly
    (in groups of equal score) and drawn with the private learner's exact samplers, which give
    each one exactly its ideal probability from fair bits (``exact_em``). Repeated points count
    once (step 2): a dichotomy is a labeling of the *distinct* points.

Points: classes on the reals take queries of shape (n,); stumps take (n, d); the finite class
takes domain indices (integers, carried as floats on the wire).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from everlast.engine.concepts.random_order import OrderSource, order_now
from everlast.engine.errors import InvalidInput

Array = NDArray[Any]
F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
I8 = NDArray[np.int8]


class Ensemble(abc.ABC):
    """The T classifiers of one round, stored for fast vote counting."""

    @property
    @abc.abstractmethod
    def size(self) -> int:
        """T, the number of classifiers."""

    @abc.abstractmethod
    def votes(self, x: Array) -> I64:
        """For each (validated) query, the number of classifiers that label it 1."""

    @abc.abstractmethod
    def to_arrays(self) -> dict[str, Array]:
        """Plain arrays that ``ConceptClass.ensemble_from_arrays`` turns back into this ensemble."""


@dataclass(frozen=True, slots=True)
class RoundStart:
    """What a round starts from (steps 3(a), 3(b) and S-hat): its T classifiers and S-hat."""

    ensemble: Ensemble
    s_hat_x: F64
    """S-hat: m_S points drawn uniformly without replacement from the round's labeled set."""
    s_hat_y: I8


@dataclass(frozen=True, slots=True)
class LabelBoostResult:
    """What LabelBoost's exponential mechanism chose, as labels of its inputs."""

    labels_labeled: I8
    """The chosen dichotomy on the labeled part S-hat (same order as given)."""
    labels_unlabeled: I8
    """The chosen dichotomy on the unlabeled part D-hat (same order as given): S_{i+1}'s labels."""
    n_dichotomies: int
    """|Pi_C(P)|: how many distinct dichotomies the mechanism chose among."""
    score: int
    """Agreements of the chosen dichotomy with the labeled part."""


class ConceptClass(abc.ABC):
    """A concept class C over a domain X, with what GenericBBL needs of it."""

    name: ClassVar[str]
    vc_dim: int
    """VC dimension (a proven upper bound where the exact value is not known); planners use it."""

    @property
    def point_dim(self) -> int:
        """1 for classes on the reals and the finite class; d for stumps on R^d."""
        return 1

    def validate_points(self, x: Any, what: str = "query") -> F64:
        """Return ``x`` as float64 of shape (n,) (point_dim 1) or (n, d); raise ``InvalidInput``
        naming the position of the first bad point (never its value)."""
        arr = as_real_array(x, what)
        d = self.point_dim
        if d == 1:
            if arr.ndim == 2 and arr.shape[1] == 1:
                arr = arr[:, 0]
            if arr.ndim != 1:
                raise InvalidInput(f"{what} points must be scalars (got an array of rank {arr.ndim})")
            bad: NDArray[np.bool_] = np.asarray(~np.isfinite(arr))
        else:
            if arr.ndim != 2 or arr.shape[1] != d:
                raise InvalidInput(f"{what} points must have dimension {d}")
            bad = np.asarray(~np.isfinite(arr).all(axis=1))
        if bad.any():
            raise InvalidInput(f"{what} point at position {int(np.argmax(bad))} is NaN or infinite")
        self._check_domain(arr, what)
        return arr

    def _check_domain(self, x: F64, what: str) -> None:
        """Extra domain checks (the finite class requires integer indices in range)."""

    @abc.abstractmethod
    def fit(self, x: F64, y: I8) -> Ensemble:
        """ERM on each of T chunks at once. ``x`` has shape (T, lam) (or (T, lam, d)), ``y`` (T, lam)
        in {0, 1}. Returns the ensemble of T minimizers of the empirical error."""

    @abc.abstractmethod
    def ensemble_from_arrays(self, arrays: dict[str, Array]) -> Ensemble:
        """Inverse of ``Ensemble.to_arrays``."""

    @abc.abstractmethod
    def labelboost(self, x_lab: F64, y_lab: I8, x_unlab: F64, rng: np.random.Generator) -> LabelBoostResult:
        """Sample a dichotomy of C on the distinct points of x_lab o x_unlab with probability
        proportional to exp(agreements with (x_lab, y_lab) / 2), exactly."""

    @abc.abstractmethod
    def label(self, params: dict[str, Any], x: F64) -> I8:
        """Apply one concept (the class's own parameterization) to points; used to score accuracy."""

    def to_spec(self) -> dict[str, Any]:
        """What ``concepts.from_spec`` needs to rebuild this class (name and parameters)."""
        return {"name": self.name}

    def arrange_order(self, d_hat: F64) -> I64:
        """The order of D-hat that ``next_round`` draws S_{i+1} from, as indices into ``d_hat``.
        Any order fixed before the draw gives the same law; classes on the reals use increasing
        value (stable), the order their fast ``next_round`` works in."""
        return np.arange(d_hat.shape[0], dtype=np.int64)

    def start_round(self, x: F64, y: I8, T: int, lam: int, m_S: int, rng: np.random.Generator) -> RoundStart:
        """Round 1 (step 2 drew its labeled set ``x``, ``y`` in random order): chunk t is rows
        t * lam ... t * lam + lam - 1; S-hat is m_S of them, uniformly (one ``choice``)."""
        ensemble = self.fit(x.reshape(T, lam, *x.shape[1:]), y.reshape(T, lam))
        hat = rng.choice(T * lam, size=m_S, replace=False)
        return RoundStart(ensemble, x[hat].copy(), y[hat].copy())

    def next_round(
        self, x_lab: F64, y_lab: I8, d_hat: F64, T: int, lam: int, m_S: int, rng: np.random.Generator,
        order_rng: OrderSource,
    ) -> RoundStart:
        """A round transition (steps 3(e)-(g), then 3(a), 3(b) of the next round). LabelBoost relabels
        D-hat (``labelboost``, drawing from ``rng``); S_{i+1} is the sequence D[o] for
        D = d_hat[``self.arrange_order(d_hat)``] and o = ``random_order(|D-hat|, T * lam, order_rng)``,
        and chunk t holds its entries t, t + T, ..., t + (lam - 1) T (strided: any fixed partition
        of a uniform order is a uniform partition); the ERM of every chunk; S-hat_{i+1} =
        S_{i+1}[choice(T * lam, m_S)], drawn from ``rng`` after LabelBoost. The order has its own
        stream (``Purpose.ORDER``), independent of LabelBoost's, so fast paths draw it concurrently.

        This is the definition; classes override it with faster code that must return the same
        thing from the same draws (tests/engine/test_concepts.py compares them). D-hat is used with
        -0.0 read as +0.0 (equal values; the fast paths' sorts would otherwise leave the sign of zero
        in S_{i+1} to the sort's order)."""
        d_hat = d_hat + 0.0
        lb = self.labelboost(x_lab, y_lab, d_hat, rng)
        where = self.arrange_order(d_hat)
        o = where[order_now(d_hat.shape[0], T * lam, order_rng)]
        sx, sy = d_hat[o], lb.labels_unlabeled[o]
        chunks_x = np.swapaxes(sx.reshape(lam, T, *sx.shape[1:]), 0, 1)
        ensemble = self.fit(np.ascontiguousarray(chunks_x), np.ascontiguousarray(sy.reshape(lam, T).T))
        hat = rng.choice(T * lam, size=m_S, replace=False)
        return RoundStart(ensemble, sx[hat], sy[hat])


def as_real_array(x: Any, what: str = "query") -> F64:
    """``x`` as float64, refusing what numpy would coerce silently: complex numbers (the imaginary
    part dropped), datetime/timedelta (days since 1970), objects, bytes and strings. Booleans and
    integers are real numbers and convert exactly up to 2^53."""
    try:
        raw = x if isinstance(x, np.ndarray) else np.asarray(x)
    except (TypeError, ValueError, OverflowError):
        raise InvalidInput(f"{what} points are not numeric") from None
    if raw.dtype.kind not in _REAL_KINDS:
        raise InvalidInput(f"{what} points must be real numbers (got {_KIND_NAMES.get(raw.dtype.kind, 'other')} "
                           "values)")
    try:
        return np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise InvalidInput(f"{what} points are not numeric or out of range") from None


_REAL_KINDS = frozenset("biuf")
_KIND_NAMES = {"c": "complex", "M": "datetime", "m": "timedelta", "O": "object", "S": "bytes",
               "U": "string", "V": "raw"}


def sort_chunks(x: F64, y: I8) -> tuple[F64, I8]:
    """Each chunk (row) of points sorted by x, its labels carried along (stable: ties keep order)."""
    order = np.argsort(x, axis=1, kind="stable")
    return np.take_along_axis(x, order, axis=1), np.take_along_axis(y, order, axis=1)


def distinct_of_sorted(s: F64) -> F64:
    """The distinct values of sorted 1-D ``s`` (``s`` itself when it has no repeats)."""
    if s.size < 2:
        return s
    new = s[1:] != s[:-1]
    if new.all():
        return s
    out: F64 = s[np.concatenate([[True], new])]
    return out


def distinct_sorted(x: F64) -> tuple[F64, I64]:
    """The distinct values of 1-D ``x`` in increasing order and, for each input, its rank among them."""
    values, inverse = np.unique(x, return_inverse=True)
    return values, inverse.astype(np.int64)


def check_labels(y: Any, n: int, what: str = "training") -> I8:
    """Labels as int8, checked to be in {0, 1} and to match the number of points."""
    try:
        arr = np.asarray(y)
    except (TypeError, ValueError, OverflowError):
        raise InvalidInput(f"{what} labels are not numeric") from None
    if arr.ndim != 1 or arr.shape[0] != n:
        raise InvalidInput(f"{what} labels must be a vector with one label per point")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise InvalidInput(f"{what} labels must be 0 or 1 (found NaN or infinite)")
    if arr.dtype.kind not in "biuf" or not np.isin(arr, (0, 1)).all():
        raise InvalidInput(f"{what} labels must be 0 or 1")
    return arr.astype(np.int8)
