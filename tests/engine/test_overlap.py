"""engine.overlap: a transition's random order drawn on a second core gives the same bytes as inline,
and a failure there changes nothing."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import numpy as np
import pytest

import engine.concepts.intervals
import engine.concepts.thresholds
from engine import codec, overlap
from engine.concepts import from_spec
from engine.design import Design
from engine.phases import Phase
from engine.predictor import Predictor
from engine.schedule import RoundSpec, Schedule

N = overlap.MIN_WORK + 4_000  # D-hat large enough to be drawn on the worker thread
needs_two_cpus = pytest.mark.skipif(not overlap.parallel(), reason="one CPU allowed: overlap runs inline")


@pytest.fixture
def inline() -> Iterator[None]:
    before = overlap.set_enabled(False)
    yield
    overlap.set_enabled(before)


def due(concept: str, seed: int = 3) -> Predictor:
    """A predictor whose round of N queries (all kept in D-hat) has just ended."""
    spec = RoundSpec(T=N // 10, lam=10, R=N, c=N, eps_bt=0.5, delta_bt=None, alpha=0.1, m_S=200, m_D=N,
                     halt_eps=0.5, halt_threshold=N)
    g = np.random.default_rng(seed)
    x = g.random(N)
    p = Predictor.create(from_spec({"name": concept}), Schedule((spec,), repeat_last=True, design=Design.named(
        "target-charged")), x, (x >= 0.5).astype(np.int8), seed=seed)
    p.answer(g.random(N))
    assert p.phase is Phase.TRANSITION_DUE
    return p


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
@pytest.mark.parametrize("concept", ["thresholds", "intervals"])
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
@pytest.mark.parametrize("module", [engine.concepts.thresholds, engine.concepts.intervals],
                         ids=["thresholds", "intervals"])
def test_a_failure_on_the_worker_changes_nothing(module: object, monkeypatch: pytest.MonkeyPatch) -> None:
    concept = "thresholds" if module is engine.concepts.thresholds else "intervals"
    p, twin = due(concept), due(concept)
    before = codec.dumps(p)
    real = module.random_order  # type: ignore[attr-defined]
    threads = []

    def failing(*a: object, **kw: object) -> object:
        import threading
        threads.append(threading.current_thread().name)
        raise MemoryError("forced on the worker")

    monkeypatch.setattr(module, "random_order", failing)
    with pytest.raises(MemoryError, match="worker"):
        p.transition()
    assert threads and threads[0].startswith("everlast-overlap")
    assert codec.dumps(p) == before
    monkeypatch.setattr(module, "random_order", real)
    p.transition()
    twin.transition()
    assert codec.dumps(p) == codec.dumps(twin)
