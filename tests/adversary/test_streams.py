"""Stream generators: deterministic given their seed, and distributed as they claim.

Distribution checks are Kolmogorov-Smirnov (or binomial) tests at a tiny alpha with fixed seeds: a
correct generator fails them with probability ~1e-6, a wrong one (wrong scale, wrong shift, wrong
mixture weight) fails them by a wide margin at these sample sizes."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from everlast.adversary_sim.drift import DriftStream
from everlast.adversary_sim.iid import DISTRIBUTIONS, make_task
from everlast.adversary_sim.poisoning import PoisoningStream
from everlast.adversary_sim.prober import BoundaryProber
from everlast.adversary_sim.streams import IIDStream
from everlast.engine.concepts import Thresholds

ALPHA = 1e-6
N = 20_000


def _draw(stream: object, n: int = N, batches: int = 4) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = [], []
    for _ in range(batches):
        x, y = stream.next_batch(n // batches)  # type: ignore[attr-defined]
        xs.append(x)
        ys.append(y)
    return np.concatenate(xs), np.concatenate(ys)


@pytest.mark.parametrize("name", sorted(DISTRIBUTIONS))
def test_iid_deterministic(name: str) -> None:
    task = make_task(Thresholds(), name)
    a, ya = _draw(IIDStream(task, 3), 1000)
    b, yb = _draw(IIDStream(task, 3), 1000)
    c, _ = _draw(IIDStream(task, 4), 1000)
    assert np.array_equal(a, b) and np.array_equal(ya, yb)
    assert not np.array_equal(a, c)


def test_iid_matches_kafka_replay_stream() -> None:
    """The in-process stream draws what ``everlast replay`` sends for the same seed."""
    from everlast.adversary_sim.kafka_replay import IIDStream as KafkaIID

    task = make_task(Thresholds(), "normal")
    a, _ = IIDStream(task, 9).next_batch(500)
    b, _ = KafkaIID(task, 9).next_batch(500)
    assert np.array_equal(a, b)


@pytest.mark.statistical
@pytest.mark.parametrize(("name", "cdf"), [
    ("uniform", stats.uniform.cdf),
    ("normal", stats.norm.cdf),
    ("heavy", lambda x: stats.t.cdf(x, 1.5)),
    ("mixture", lambda x: 0.3 * stats.norm.cdf(x, -2.0, 1.0) + 0.7 * stats.norm.cdf(x, 2.0, 0.5)),
])
def test_iid_distribution(name: str, cdf: object) -> None:
    task = make_task(Thresholds(), name)
    x, y = _draw(IIDStream(task, 11))
    assert stats.kstest(x, cdf).pvalue > ALPHA
    assert np.array_equal(y, (x >= task.target["t"]).astype(np.int8))


@pytest.mark.statistical
def test_iid_ties_distribution() -> None:
    x, _ = _draw(IIDStream(make_task(Thresholds(), "ties"), 11))
    counts = np.bincount(np.rint(x * 20).astype(int), minlength=21)
    assert counts.size == 21
    assert stats.chisquare(counts).pvalue > ALPHA


def test_drift_deterministic_and_shift() -> None:
    task = make_task(Thresholds(), "normal")
    a = DriftStream(task, 5, total_shift=2.0, horizon=1000)
    b = DriftStream(task, 5, total_shift=2.0, horizon=1000)
    xa, _ = _draw(a, 4000)
    xb, _ = _draw(b, 4000)
    assert np.array_equal(xa, xb)
    assert a.shift_at(0) == 0.0 and a.shift_at(500) == pytest.approx(1.0) and a.shift_at(10**6) == 2.0
    assert a.report()["shift_now"] == 2.0
    p = DriftStream(task, 5, total_shift=1.0, horizon=400, kind="periodic")
    assert p.shift_at(100) == pytest.approx(1.0) and p.shift_at(200) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.statistical
@pytest.mark.parametrize("kind", ["linear", "periodic"])
def test_drift_distribution(kind: str) -> None:
    """Removing the announced shift leaves the base distribution; the labels stay the hidden concept's."""
    task = make_task(Thresholds(), "normal")
    s = DriftStream(task, 6, total_shift=3.0, horizon=N // 2, kind=kind)
    x, y = _draw(s)
    shift = np.array([s.shift_at(t) for t in range(N)])
    assert stats.kstest(x - shift, stats.norm.cdf).pvalue > ALPHA
    assert np.array_equal(y, (x >= task.target["t"]).astype(np.int8))
    # the shift is really there: the raw points of the second half are not N(0, 1)
    assert stats.kstest(x[N // 2 :], stats.norm.cdf).pvalue < ALPHA
    ref, _ = s.reference(np.random.default_rng(1), N)
    assert stats.kstest(ref - s.shift_at(s.emitted), stats.norm.cdf).pvalue > ALPHA


def test_poisoning_deterministic() -> None:
    task = make_task(Thresholds(), "uniform")
    a, _ = _draw(PoisoningStream(task, 2, fraction=0.5), 2000)
    b, _ = _draw(PoisoningStream(task, 2, fraction=0.5), 2000)
    assert np.array_equal(a, b)


@pytest.mark.statistical
@pytest.mark.parametrize("fraction", [0.2, 0.9])
def test_poisoning_distribution(fraction: float) -> None:
    """Points follow the mixture (1 - f) U(0, 1) + f U(window), and the poison share is f."""
    task = make_task(Thresholds(), "uniform")
    s = PoisoningStream(task, 8, fraction=fraction, side="negative", offset=0.3, spread=0.02)
    x, y = _draw(s)
    lo, hi = s.window
    assert lo == pytest.approx(0.19, abs=0.01) and hi == pytest.approx(0.21, abs=0.01)

    def cdf(v: np.ndarray) -> np.ndarray:
        return (1 - fraction) * stats.uniform.cdf(v) + fraction * stats.uniform.cdf(v, lo, hi - lo)

    assert stats.kstest(x, cdf).pvalue > ALPHA
    assert stats.binomtest(s.poisoned, s.emitted, fraction).pvalue > ALPHA
    assert np.array_equal(y, (x >= task.target["t"]).astype(np.int8))


def _oracle(boundary: float, noise: float, seed: int):  # type: ignore[no-untyped-def]
    g = np.random.default_rng(seed)

    def answer(x: np.ndarray) -> np.ndarray:
        return ((x + noise * g.standard_normal(x.size)) >= boundary).astype(np.int8)

    return answer


def _drive(prober: BoundaryProber, oracle, steps: int, n: int = 64) -> list[np.ndarray]:  # type: ignore[no-untyped-def]
    seen = []
    for _ in range(steps):
        x, _ = prober.next_batch(n)
        seen.append(x)
        prober.observe(oracle(x))
    return seen


def test_prober_deterministic() -> None:
    task = make_task(Thresholds(), "uniform")
    a = _drive(BoundaryProber(task, 1), _oracle(0.37, 0.01, 0), 12)
    b = _drive(BoundaryProber(task, 1), _oracle(0.37, 0.01, 0), 12)
    assert all(np.array_equal(u, v) for u, v in zip(a, b, strict=True))


@pytest.mark.parametrize("noise", [0.0, 0.002])
def test_prober_finds_the_boundary_then_stays(noise: float) -> None:
    task = make_task(Thresholds(), "uniform")
    pr = BoundaryProber(task, 1)
    _drive(pr, _oracle(0.37, noise, 2), 30)
    rep = pr.report()
    assert rep["phase"] == "exhaust"
    assert rep["boundary_estimate"] == pytest.approx(0.37, abs=max(10 * noise, 1e-3))
    x1, _ = pr.next_batch(64)
    pr.observe(np.ones(64, np.int8))
    x2, _ = pr.next_batch(64)
    assert np.all(x1 == x1[0]) and np.array_equal(x1, x2)  # ones-rate reached: it stays put


def test_prober_rejects_multidimensional_classes() -> None:
    from everlast.engine.concepts import from_spec

    with pytest.raises(ValueError, match="one-dimensional"):
        BoundaryProber(make_task(from_spec({"name": "stumps", "d": 2}), "uniform"))
