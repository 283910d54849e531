"""Real data sets shipped inside packages (nothing is downloaded) and the methods ``bench.accuracy``
compares on them.

Data sets (binary labels; ``load(name, seed)`` draws a stratified 70/30 split with ``random_state = seed``,
``bench.accuracy`` one per fit, ``bench.bounds`` and the daemon's test the one of seed 0):
  * ``bananas`` (river, 5,300 x 2), ``phishing`` (river, 1,250 x 9), ``shuttle`` (river, 49,097 x 9);
  * ``breast-cancer`` (scikit-learn, 569 x 30);
  * ``synthetic-10`` (5,000 x 4, generated from a fixed seed: uniform on [0, 1]^4, label 1 on the corner
    x_0 > 0.7 and x_1 > 0.7, each label flipped with probability 0.02: about 10.6% positives).

Methods: ``everlast-stumps`` and ``everlast-trees-3`` (the served learner, ``PrivateLearner.fit`` as
the daemon runs it by default: a quarter of the training set held out for the validated certificate
at validation_beta = 0.01; on the domain of ``BINS`` bins of the same per-feature ranges diffprivlib
is given, below); diffprivlib's ``diffprivlib-logreg``, ``diffprivlib-nb`` (GaussianNB) and
``diffprivlib-tree`` (DecisionTreeClassifier, its default depth 5) given per-feature bounds: the
minimum and maximum over the whole data set (train and test). These ranges are **a benchmark's
non-private choice**, read from the data (test split included), not public bounds: they stand in for
the ranges a user who knows the features would state, favour every method given them (diffprivlib's
models and the learner's bins, whose guarantees assume bounds chosen independently of the data), and
make the benchmark's fits carry no privacy claim. A deployment must take its ranges from public
knowledge, never from the data (docs/privacy/learner.md 1, "Bins"). LogisticRegression sees the features
scaled to [0, 1] by those bounds and data_norm = sqrt(d). Non-private baselines (scikit-learn):
``majority``, ``best-stump`` (a depth-1 tree), ``tree-3`` (depth 3, Gini), ``logreg``.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]
I8 = NDArray[np.int8]
DATASETS = ("bananas", "phishing", "breast-cancer", "shuttle", "synthetic-10")
BINS = 256
HOLDOUT = 0.25
"""The daemon's defaults (``[models.learner] holdout``, ``validation_beta``)."""
VALIDATION_BETA = 0.01
PRIVATE = ("everlast-stumps", "everlast-trees-3", "diffprivlib-logreg", "diffprivlib-nb", "diffprivlib-tree")
BASELINES = ("majority", "best-stump", "tree-3", "logreg")


@dataclass(frozen=True, slots=True)
class Split:
    name: str
    x_train: F64
    y_train: I8
    x_test: F64
    y_test: I8
    lo: F64
    """Per-feature ranges given to diffprivlib and the learner's bins: the whole data set's minimum (and
    ``hi`` maximum), a benchmark's non-private choice, not public bounds."""
    hi: F64


def _river(name: str) -> tuple[F64, I8]:
    from river import datasets

    ds = {"bananas": datasets.Bananas, "phishing": datasets.Phishing, "shuttle": datasets.Shuttle}[name]()  # type: ignore[abstract]
    xs, ys = [], []
    for x, y in ds:
        xs.append([float(v) for v in x.values()])
        ys.append(int(y))
    return np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.int8)


@functools.cache
def _data(name: str) -> tuple[F64, I8]:
    """The whole data set (read once per process)."""
    if name == "breast-cancer":
        from sklearn.datasets import load_breast_cancer

        b = load_breast_cancer()
        x, y = np.asarray(b.data, dtype=np.float64), np.asarray(b.target, dtype=np.int8)
    elif name == "synthetic-10":
        rng = np.random.default_rng(20261202)
        x = rng.random((5000, 4))
        y = (((x[:, 0] > 0.7) & (x[:, 1] > 0.7)) ^ (rng.random(5000) < 0.02)).astype(np.int8)
    elif name in DATASETS:
        x, y = _river(name)
    else:
        raise ValueError(f"unknown data set {name!r}; known: {', '.join(DATASETS)}")
    return x, y


def load(name: str, seed: int = 0) -> Split:
    """The data set's stratified 70/30 split drawn with ``random_state = seed`` (a new split per seed;
    the per-feature ranges are the whole data set's, the same for every split)."""
    from sklearn.model_selection import train_test_split

    x, y = _data(name)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.3, stratify=y, random_state=seed)
    return Split(name, xtr, ytr, xte, yte, x.min(axis=0), x.max(axis=0))


def have(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


Predict = Callable[[F64], Any]


def private_fit(method: str, s: Split, epsilon: float, seed: int) -> Predict:
    """Fit one private model; returns its predict function on test points."""
    if method.startswith("everlast-"):
        m = everlast_fit(method, s, epsilon, seed)
        return lambda x: m.answer(x).labels
    return _diffprivlib(method, s, epsilon, seed)


def everlast_fit(method: str, s: Split, epsilon: float, seed: int) -> Any:
    """The served learner as the daemon fits it by default (holdout and validated certificate), on the
    benchmark's ranges (read from the data: no privacy claim) cut into ``BINS`` bins."""
    from everlast.engine.learner import Domain, PrivateLearner

    d = s.x_train.shape[1]
    spec = {"name": "stumps", "d": d} if method == "everlast-stumps" else {"name": "trees", "d": d, "depth": 3}
    # a seed per fit, for a reproducible table; the daemon never takes one (docs/privacy/learner.md 2)
    return PrivateLearner.fit(spec, s.x_train, s.y_train, epsilon=epsilon, seed=seed,
                              domain=Domain.bins(s.lo, s.hi, BINS), holdout=HOLDOUT, beta=VALIDATION_BETA)


def _diffprivlib(method: str, s: Split, epsilon: float, seed: int) -> Predict:
    from diffprivlib import models

    bounds = (s.lo, s.hi)
    span = np.where(s.hi > s.lo, s.hi - s.lo, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "diffprivlib-logreg":
            scale: Callable[[F64], F64] = lambda x: np.clip((x - s.lo) / span, 0.0, 1.0)  # noqa: E731
            lr = models.LogisticRegression(epsilon=epsilon, data_norm=math.sqrt(s.x_train.shape[1]), random_state=seed)
            lr.fit(scale(s.x_train), s.y_train)
            return lambda x: lr.predict(scale(x))
        if method == "diffprivlib-nb":
            nb = models.GaussianNB(epsilon=epsilon, bounds=bounds, random_state=seed)
            nb.fit(s.x_train, s.y_train)
            return nb.predict  # type: ignore[no-any-return]
        if method == "diffprivlib-tree":
            dt = models.DecisionTreeClassifier(epsilon=epsilon, bounds=bounds, classes=[0, 1], random_state=seed)
            dt.fit(s.x_train, s.y_train)
            return dt.predict  # type: ignore[no-any-return]
    raise ValueError(f"unknown method {method!r}")


def baseline_fit(method: str, s: Split) -> Predict:
    """The non-private baselines (deterministic given the split: one fit per split)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.tree import DecisionTreeClassifier

    if method == "majority":
        label = int(np.bincount(s.y_train).argmax())
        return lambda x: np.full(x.shape[0], label)
    if method in ("best-stump", "tree-3"):
        t = DecisionTreeClassifier(max_depth=1 if method == "best-stump" else 3, random_state=0)
        t.fit(s.x_train, s.y_train)
        return t.predict  # type: ignore[no-any-return]
    if method == "logreg":
        span = np.where(s.hi > s.lo, s.hi - s.lo, 1.0)
        lr = LogisticRegression(max_iter=2000).fit((s.x_train - s.lo) / span, s.y_train)
        return lambda x: lr.predict((x - s.lo) / span)
    raise ValueError(f"unknown baseline {method!r}")


def accuracy(predict: Predict, s: Split) -> float:
    return float((np.asarray(predict(s.x_test)).astype(np.int64) == s.y_test).mean())
