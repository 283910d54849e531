"""engine.overlap: a transition's random order drawn on a second core gives the same bytes as inline,
and a failure there changes nothing."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import everlast.engine.concepts.intervals
import everlast.engine.concepts.random_order as ro
import everlast.engine.concepts.thresholds
from everlast.engine import codec, overlap
from everlast.engine.concepts import ConceptClass, from_spec
from everlast.engine.design import Design
from everlast.engine.phases import Phase
from everlast.engine.predictor import PREPARE_AHEAD, Predictor
from everlast.engine.schedule import RoundSpec, Schedule

N = overlap.MIN_WORK + 4_000  # D-hat large enough to be drawn on the worker thread
needs_two_cpus = pytest.mark.skipif(not overlap.parallel(), reason="one CPU allowed: overlap runs inline")


@pytest.fixture
def inline() -> Iterator[None]:
    before = overlap.set_enabled(False)
    yield
    overlap.set_enabled(before)


CONCEPTS = {"thresholds": {"name": "thresholds"}, "intervals": {"name": "intervals"},
            "stumps": {"name": "stumps", "d": 2}}


def points(g: np.random.Generator, concept: str, n: int) -> np.ndarray:
    return g.random((n, 2)) if concept == "stumps" else g.random(n)


def due(concept: str, seed: int = 3, prepared: bool = False) -> Predictor:
    """A predictor whose round of N queries (all kept in D-hat) has just ended: restored from its
    bytes (the transition draws S_{i+1}'s order itself) unless ``prepared`` (the one that answered
    the last batch, which began that order then: ``PreparedOrder``)."""
    spec = RoundSpec(T=N // 10, lam=10, R=N, c=N, eps_bt=0.5, delta_bt=None, alpha=0.1, m_S=200, m_D=N,
                     halt_eps=0.5, halt_threshold=N)
    g = np.random.default_rng(seed)
    x = points(g, concept, N)
    y = (x.reshape(N, -1)[:, 0] >= 0.5).astype(np.int8)
    p = Predictor.create(from_spec(CONCEPTS[concept]), Schedule((spec,), repeat_last=True, design=Design.named(
        "target-charged")), x, y, seed=seed)
    p.answer(points(g, concept, N))
    assert p.phase is Phase.TRANSITION_DUE
    if prepared:
        return p
    q = codec.loads(codec.dumps(p))
    assert isinstance(q, Predictor)
    return q


def test_small_work_runs_inline_and_large_work_on_a_thread() -> None:
    small = overlap.begin(sum, [1, 2], work=10)
    assert not small.threaded and small.result() == 3
    big = overlap.begin(sum, [1, 2], work=overlap.MIN_WORK)
    assert big.threaded == overlap.parallel() and big.result() == 3


@pytest.mark.parametrize("work", [1, overlap.MIN_WORK])
def test_an_exception_reaches_the_caller(work: int) -> None:
    def boom() -> None:
        raise MemoryError("forced")

    pending = overlap.begin(boom, work=work)
    with pytest.raises(MemoryError, match="forced"):
        pending.result()


@needs_two_cpus
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_gets_its_own_worker() -> None:
    """The parent's pool exists (its threads do not survive a fork); the child's job still runs."""
    assert overlap.begin(sum, [1], work=overlap.MIN_WORK).result() == 1
    pid = os.fork()
    if pid == 0:  # child: exit 0 only if the threaded job ran; SIGALRM ends a hung child
        ok = False
        try:
            signal.alarm(20)
            pending = overlap.begin(sum, [2, 3], work=overlap.MIN_WORK)
            ok = pending.threaded and pending.result() == 5
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_disabled_means_inline(inline: None) -> None:
    assert not overlap.parallel()
    assert not overlap.begin(sum, [1], work=overlap.MIN_WORK).threaded


@needs_two_cpus
@pytest.mark.parametrize("concept", list(CONCEPTS))
def test_threaded_and_inline_transitions_give_the_same_bytes(concept: str) -> None:
    threaded, alone = due(concept), due(concept)
    threaded.transition()
    before = overlap.set_enabled(False)
    try:
        alone.transition()
    finally:
        overlap.set_enabled(before)
    assert codec.dumps(threaded) == codec.dumps(alone)


@needs_two_cpus
@pytest.mark.parametrize("module", [everlast.engine.concepts.thresholds, everlast.engine.concepts.intervals],
                         ids=["thresholds", "intervals"])
def test_a_failure_on_the_worker_changes_nothing(module: object, monkeypatch: pytest.MonkeyPatch) -> None:
    concept = "thresholds" if module is everlast.engine.concepts.thresholds else "intervals"
    p, twin = due(concept), due(concept)
    before = codec.dumps(p)
    real = ro.random_order
    threads = []

    def failing(*a: object, **kw: object) -> object:
        import threading
        threads.append(threading.current_thread().name)
        raise MemoryError("forced on the worker")

    monkeypatch.setattr(ro, "random_order", failing)
    with pytest.raises(MemoryError, match="worker"):
        p.transition()
    assert threads and threads[0].startswith("everlast-overlap")
    assert codec.dumps(p) == before
    monkeypatch.setattr(ro, "random_order", real)
    p.transition()
    twin.transition()
    assert codec.dumps(p) == codec.dumps(twin)


def test_a_pool_that_refuses_the_job_means_inline(monkeypatch: pytest.MonkeyPatch) -> None:
    """At interpreter exit the pool refuses new jobs ("cannot schedule new futures after shutdown");
    a transition still queued then must run inline, not fail (review of this module, E1)."""
    closed = ThreadPoolExecutor(max_workers=1)
    closed.shutdown()
    monkeypatch.setattr(overlap, "_executor", lambda: closed)
    monkeypatch.setattr(overlap, "parallel", lambda: True)
    pending = overlap.begin(sum, [4, 5], work=overlap.MIN_WORK)
    assert not pending.threaded and pending.result() == 9


@needs_two_cpus
@pytest.mark.parametrize("module", [everlast.engine.concepts.thresholds, everlast.engine.concepts.intervals],
                         ids=["thresholds", "intervals"])
def test_a_failure_beside_the_worker_waits_for_it_and_changes_nothing(
        module: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """LabelBoost fails while the order is still being drawn: the exception reaches the caller only
    after the job has ended (no orphan keeps a core into the retry), and nothing changed."""
    concept = "thresholds" if module is everlast.engine.concepts.thresholds else "intervals"
    real_order = ro.random_order
    em = "threshold_em" if concept == "thresholds" else "interval_em"
    fail_beside_a_slow_job(concept, monkeypatch,
                           lambda slow: monkeypatch.setattr(ro, "random_order", slow(real_order)),
                           lambda failing: monkeypatch.setattr(module, em, failing))


@pytest.mark.parametrize("concept", list(CONCEPTS))
@pytest.mark.parametrize("threaded", [True, False], ids=["threaded", "inline"])
def test_fast_paths_equal_the_definition_on_strided_orders(
        concept: str, threaded: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The views ``packed_order`` returns above ``CONTIGUOUS_MAX`` (10^7-point rounds), taken on the
    worker or inline, give each class's fast ``next_round`` what the definition gives, from the
    same draws of both streams."""
    monkeypatch.setattr(ro, "CONTIGUOUS_MAX", 0)
    monkeypatch.setattr(ro, "KEY_CHUNK", 6)
    monkeypatch.setattr(overlap, "MIN_WORK", 0)
    if not threaded:
        monkeypatch.setattr(overlap, "_enabled", False)
    c = from_spec(CONCEPTS[concept])
    g = np.random.default_rng(11)
    T, lam, m_S, n = 40, 10, 30, 470
    x_lab = points(g, concept, 50)
    y_lab = (x_lab.reshape(50, -1)[:, 0] >= 0.5).astype(np.int8)
    d_hat = points(g, concept, n)
    g1, g2, o1, o2 = (np.random.default_rng(s) for s in (1, 1, 2, 2))
    fast = c.next_round(x_lab, y_lab, d_hat, T, lam, m_S, g1, o1)
    ref = ConceptClass.next_round(c, x_lab, y_lab, d_hat, T, lam, m_S, g2, o2)
    assert g1.bit_generator.state == g2.bit_generator.state
    assert o1.bit_generator.state == o2.bit_generator.state
    a, b = fast.ensemble.to_arrays(), ref.ensemble.to_arrays()
    assert a.keys() == b.keys()
    for key in a:
        assert np.asarray(a[key]).tobytes() == np.asarray(b[key]).tobytes()
    assert fast.s_hat_x.tobytes() == ref.s_hat_x.tobytes()
    np.testing.assert_array_equal(fast.s_hat_y, ref.s_hat_y)


def test_a_failure_before_the_job_starts_cancels_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job still queued when the caller fails is cancelled, never run later."""
    pool = ThreadPoolExecutor(max_workers=1)
    release, ran = threading.Event(), threading.Event()
    pool.submit(release.wait, 10)  # occupies the one worker
    monkeypatch.setattr(overlap, "_executor", lambda: pool)
    monkeypatch.setattr(overlap, "parallel", lambda: True)
    with pytest.raises(MemoryError), overlap.begin(ran.set, work=overlap.MIN_WORK) as pending:
        assert pending.threaded
        raise MemoryError("forced before the job started")
    release.set()
    pool.shutdown(wait=True)
    assert not ran.is_set()


@needs_two_cpus
def test_the_next_rounds_noise_opens_on_the_worker_and_a_failure_there_changes_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``Predictor.transition`` opens the next round's noise streams beside the transition (they
    need nothing from it): a failure there reaches the caller and leaves the predictor as it was."""
    import threading

    import everlast.engine.predictor
    from everlast.engine.design import RoundNoise

    p, twin = due("thresholds"), due("thresholds")
    before = codec.dumps(p)
    real = RoundNoise.start
    where: list[str] = []

    class Failing:
        @staticmethod
        def start(*a: object) -> object:
            where.append(threading.current_thread().name)
            raise MemoryError("forced while opening the noise")

    monkeypatch.setattr(everlast.engine.predictor, "RoundNoise", Failing)
    with pytest.raises(MemoryError, match="opening the noise"):
        p.transition()
    assert where and where[0].startswith("everlast-overlap")
    assert codec.dumps(p) == before
    monkeypatch.undo()
    assert RoundNoise.start == real
    p.transition()
    twin.transition()
    assert codec.dumps(p) == codec.dumps(twin)


@needs_two_cpus
def test_a_failure_in_the_transition_waits_for_the_noise_job_and_changes_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """LabelBoost fails while the next round's noise is still being opened on the worker: the
    exception reaches the caller only after that job has ended, and the predictor is unchanged
    (review of the noise job, F8)."""
    import everlast.engine.predictor
    from everlast.engine.design import RoundNoise


    def slow_noise(slow: Callable[[Callable[..., object]], Callable[..., object]]) -> None:
        slowed = type("Slow", (), {"start": staticmethod(slow(RoundNoise.start))})
        monkeypatch.setattr(everlast.engine.predictor, "RoundNoise", slowed)

    fail_beside_a_slow_job("thresholds", monkeypatch, slow_noise,
                           lambda failing: monkeypatch.setattr(everlast.engine.concepts.thresholds, "threshold_em",
                                                               failing))


def fail_beside_a_slow_job(concept: str, monkeypatch: pytest.MonkeyPatch,
                           patch_job: Callable[[Callable[[Callable[..., object]], Callable[..., object]]], None],
                           patch_em: Callable[[Callable[..., object]], None]) -> None:
    """A job on the worker slowed down (``patch_job`` installs ``slow(real)``), LabelBoost failing
    while it runs (``patch_em``): the exception reaches the caller only after the job has ended (no
    orphan keeps a core into the retry), the predictor is unchanged, and a retry equals a twin."""
    p, twin = due(concept), due(concept)
    before = codec.dumps(p)
    started, done = threading.Event(), threading.Event()

    def slow(real: Callable[..., object]) -> Callable[..., object]:
        def job(*a: object, **kw: object) -> object:
            started.set()
            time.sleep(0.3)
            out = real(*a, **kw)
            done.set()
            return out
        return job

    def failing_em(*a: object, **kw: object) -> object:
        assert started.wait(10), "the worker never picked the job up"  # fail while it runs
        raise MemoryError("forced beside the worker")

    patch_job(slow)
    patch_em(failing_em)
    with pytest.raises(MemoryError, match="beside the worker"):
        p.transition()
    assert done.is_set()
    assert codec.dumps(p) == before
    monkeypatch.undo()
    p.transition()
    twin.transition()
    assert codec.dumps(p) == codec.dumps(twin)


# -- S_{i+1}'s order begun with the round's last batch (PreparedOrder) ----------------------------


@pytest.mark.parametrize("concept", list(CONCEPTS))
def test_an_order_prepared_with_the_last_batch_gives_the_same_bytes(concept: str) -> None:
    prepared, restored = due(concept, prepared=True), due(concept)
    assert prepared._prepared is not None and restored._prepared is None
    assert prepared._prepared[1]._pending is not None
    assert prepared._prepared[1]._pending.threaded == overlap.parallel()
    assert codec.dumps(prepared) == codec.dumps(restored)  # not state
    prepared.transition()
    restored.transition()
    assert prepared._prepared is None
    assert codec.dumps(prepared) == codec.dumps(restored)


def last_batch_due(concept: str) -> tuple[Predictor, np.ndarray]:
    """``due``'s predictor one batch before the round's end, that batch reaching its last 1/8."""
    g = np.random.default_rng(11)
    p = due(concept)
    p.transition()
    q = points(g, concept, N)
    cut = N - N // PREPARE_AHEAD - 1
    p.answer(q[:cut])
    assert p._prepared is None
    return p, q[cut:]


def test_the_order_is_begun_once_by_the_batch_that_reaches_the_rounds_last_eighth() -> None:
    p, last = last_batch_due("thresholds")
    twin = codec.loads(codec.dumps(p))
    assert isinstance(twin, Predictor)
    p.answer(last[:1])  # reaches R - R/8
    assert p._prepared is not None and p._prepared[0] == p.round + 1
    first = p._prepared
    p.answer(last[1:-1])
    assert p._prepared is first and p.phase is Phase.ANSWERING
    p.answer(last[-1:])
    assert p._prepared is first and p.phase is Phase.TRANSITION_DUE
    twin.answer(last)
    for q in (p, twin):
        q.transition()
    assert codec.dumps(p) == codec.dumps(twin)


@pytest.mark.parametrize("design", ["target-charged", "paper"])
def test_a_round_that_halts_drops_its_order(design: str) -> None:
    from tests.engine.helpers import tops_predictor
    p = (tops_predictor(design, halt_threshold=4, c=10) if design == "target-charged"
         else tops_predictor(design, c=4))
    R = p.spec.R
    p.answer(np.full(R - R // PREPARE_AHEAD, -1.0))  # no tops; reaches the last eighth
    assert p._prepared is not None
    p.answer(np.full(20, 0.5))  # tops until the round pauses: it still transitions, with its order
    assert p.phase is Phase.PAUSED and p._prepared is not None
    twin = codec.loads(codec.dumps(p))  # no prepared order: recomputed inline, the same bytes
    for q in (p, twin):
        q.answer(np.full(q.capacity or 0, -1.0))
        assert q.phase is Phase.TRANSITION_DUE
        q.transition()
    assert codec.dumps(p) == codec.dumps(twin) and p.round == 2


def test_an_order_that_failed_on_the_worker_fails_the_transition_and_a_retry_recomputes_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    p, last = last_batch_due("thresholds")
    twin = codec.loads(codec.dumps(p))
    assert isinstance(twin, Predictor)

    def failing(*a: object, **kw: object) -> object:
        raise MemoryError("forced in the prepared order")

    monkeypatch.setattr(ro, "random_order", failing)
    p.answer(last)  # the job fails, the batch does not
    monkeypatch.undo()
    twin.answer(last)
    before = codec.dumps(p)
    assert before == codec.dumps(twin)
    with pytest.raises(MemoryError, match="prepared order"):
        p.transition()
    assert codec.dumps(p) == before
    p.transition()
    twin.transition()
    assert codec.dumps(p) == codec.dumps(twin)


def test_a_last_batch_that_fails_drops_its_order_and_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import everlast.engine.between_thresholds as bt
    p, last = last_batch_due("thresholds")
    before = codec.dumps(p)
    cancelled = []
    real_cancel = ro.PreparedOrder.cancel

    def cancel(self: ro.PreparedOrder) -> None:
        cancelled.append(self)
        real_cancel(self)

    def failing(*a: object, **kw: object) -> object:
        raise MemoryError("forced in the last batch")

    monkeypatch.setattr(ro.PreparedOrder, "cancel", cancel)
    monkeypatch.setattr(bt, "halt_tct", failing)
    with pytest.raises(MemoryError, match="last batch"):
        p.answer(last)
    assert len(cancelled) == 1 and p._prepared is None
    assert codec.dumps(p) == before
    monkeypatch.undo()
    twin = codec.loads(before)
    assert isinstance(twin, Predictor)
    for q in (p, twin):
        q.answer(last)
        q.transition()
    assert codec.dumps(p) == codec.dumps(twin)


def test_a_prepared_order_hands_out_its_job_once_and_recomputes_otherwise() -> None:
    from everlast.engine.design import Purpose, generator
    n, k = overlap.MIN_WORK + 100, overlap.MIN_WORK
    fresh = lambda: generator(12345, 2, Purpose.ORDER)  # noqa: E731
    want = ro.random_order(n, k, fresh())
    prep = ro.PreparedOrder(n, k, fresh)
    first = ro.order_job(n, k, prep).result()
    first[:] = 0  # the first caller may change its array in place (Thresholds.next_round does)
    assert np.array_equal(ro.order_job(n, k, prep).result(), want)  # a retry recomputes
    other = ro.PreparedOrder(n, k, fresh)
    assert np.array_equal(ro.order_job(n, k - 1, other).result(), ro.random_order(n, k - 1, fresh()))
    assert np.array_equal(ro.order_job(n, k, fresh()).result(), want)  # a plain generator, as before
    dropped = ro.PreparedOrder(n, k, fresh)
    dropped.cancel()
    assert dropped._pending is None and np.array_equal(dropped.job(n, k).result(), want)


def slowed_order(monkeypatch: pytest.MonkeyPatch, seconds: float = 0.3) -> tuple[threading.Event, threading.Event]:
    """``random_order`` slowed down; events for its start and its end."""
    started, done = threading.Event(), threading.Event()
    real = ro.random_order

    def slow(*a: object, **kw: object) -> object:
        started.set()
        time.sleep(seconds)
        out = real(*a, **kw)  # type: ignore[arg-type]
        done.set()
        return out

    monkeypatch.setattr(ro, "random_order", slow)
    return started, done


@needs_two_cpus
def test_a_failing_last_batch_waits_for_its_order_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """No orphan keeps a core into the retry (review 5, F1)."""
    import everlast.engine.between_thresholds as bt
    p, last = last_batch_due("thresholds")
    started, done = slowed_order(monkeypatch)
    real_run = bt.halt_tct

    def failing(*a: object, **kw: object) -> object:
        assert started.wait(10)
        raise MemoryError("forced while the order runs")

    monkeypatch.setattr(bt, "halt_tct", failing)
    with pytest.raises(MemoryError, match="order runs"):
        p.answer(last)
    assert done.is_set() and p._prepared is None
    monkeypatch.setattr(bt, "halt_tct", real_run)


@needs_two_cpus
def test_a_paused_round_keeps_its_order_running(monkeypatch: pytest.MonkeyPatch) -> None:
    """A round that pauses still transitions at its R-th position: the order begun in its last eighth
    keeps running (nothing waits for it at the pause)."""
    from tests.engine.helpers import tops_predictor
    p = tops_predictor("target-charged", halt_threshold=4, c=10)
    monkeypatch.setattr(overlap, "MIN_WORK", 0)  # a thread even for this small round
    started, done = slowed_order(monkeypatch, seconds=2.0)
    R = p.spec.R
    p.answer(np.full(R - R // PREPARE_AHEAD, -1.0))
    assert p._prepared is not None and started.wait(10)
    p.answer(np.full(20, 0.5))
    assert p.phase is Phase.PAUSED and p._prepared is not None and not done.is_set()
    assert done.wait(10)


@needs_two_cpus
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_the_order_runs_draws_it_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child has the job's future but not its thread: it recomputes the order (review 5, F2)."""
    p, last = last_batch_due("thresholds")
    twin = codec.loads(codec.dumps(p))
    assert isinstance(twin, Predictor)
    started, _ = slowed_order(monkeypatch, seconds=2.0)
    p.answer(last)
    assert started.wait(10)
    monkeypatch.undo()
    twin.answer(last)
    twin.transition()
    want = codec.dumps(twin)
    pid = os.fork()
    if pid == 0:  # child: SIGALRM ends a hung child
        ok = False
        try:
            signal.alarm(20)
            p.transition()
            ok = codec.dumps(p) == want
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    p.transition()  # the parent's own job is still there
    assert codec.dumps(p) == want


def test_copies_and_pickles_leave_the_prepared_order_behind() -> None:
    """Review 5, F3: the order is a cache; a copy draws it again, with the same bytes."""
    import copy
    import pickle
    p, last = last_batch_due("thresholds")
    p.answer(last)
    assert p._prepared is not None
    for q in (copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert isinstance(q, Predictor) and q._prepared is None
        assert codec.dumps(q) == codec.dumps(p)
        q.transition()
        want = codec.dumps(q)
    p.transition()
    assert codec.dumps(p) == want
