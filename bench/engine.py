"""Engine throughput and round-transition cost, as ratios to bare-numpy baselines.

    python -m bench.engine [--quick]

engine: queries/s of ``Predictor.answer`` for thresholds with T classifiers, against a floor that
does only the unavoidable work for the same batches: the binary-search vote count and the exact
discrete Laplace draws the design needs, done the straightforward way: one ``engine.noise.sample`` call
per noise per batch at the round's own scales (default design, target-charged: z_j and xi_j per query;
the paper's: nu_j per query and one threshold draw mu per top). ratio = engine qps / floor qps (>= 1.0:
the engine's bookkeeping costs less than its replayable streams save: they draw in canonical blocks of
``engine.design.QUERY_BLOCK``, a cache-friendly size, where a batch-sized draw is not). Both are timed
in CPU seconds of this process (single-threaded work), interleaved, best of 7.
transition: seconds of ``Predictor.transition`` (LabelBoost over the round's D-hat, drawing
S_{i+1}, refitting T chunks) against ``np.sort`` of the same number of points (thresholds unless
``--concept``); ``ratio`` is of the best wall-clock times of several repeats, ``ratio_median`` of
the medians, ``cpu_ratio`` of the best process CPU times (both threads: a transition opens the
next round's noise on a second core, ``engine.overlap``, so its wall time is below its CPU time;
``overlap`` says whether it could). CPU time is also less sensitive to other processes on a shared
machine. The round's last eighth began S_{i+1}'s uniform order on the second core
(``PreparedOrder``), so that sort of n keys is not in these figures where it finished while the
round was answered; where it had not (10^7 points: the last eighth is answered faster than the
order is drawn), the transition waits for the rest. They are how long answering stops.
``*_unprepared`` time the same transition without it, as after a restore from a checkpoint: the
order is then drawn beside LabelBoost, inside the transition.
small batches: the ``engine`` rows with ``batch`` = 1000 answer the default design in batches of the
size a daemon's partition hands the engine (``variant``: ``off``, per-client quotas on with 8 clients,
the burn-rate signal on, or both; docs/privacy/genericbbl.md 5.5), against the same floor at that
batch size.
constant_work: CPU microseconds of ``engine.between_thresholds.run_tct`` per batch of 1000 queries on
a round far below its halting threshold and on one within reach of it (neither halts), interleaved,
best of 9; ``ratio`` = near / far. The answer path's work must not depend on the private top count (1.0 up to timing
noise; it was ~1.45 while run_tct skipped the per-query test far from the threshold).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from everlast.engine import between_thresholds as bt
from everlast.engine import noise, overlap
from everlast.engine.concepts import ConceptClass, Thresholds, from_spec
from everlast.engine.design import PAPER, NoisePlan, noise_plan
from everlast.engine.phases import Phase
from everlast.engine.planner.fill import fill_tests
from everlast.engine.predictor import Predictor
from everlast.engine.schedule import RoundSpec, Schedule

BATCH = 1 << 16
SMALL_BATCH = 1000
VARIANTS = ("off", "quotas", "burn", "quotas+burn")
CLIENTS = 8


def best_of(fn: Callable[[], float], repeats: int) -> float:
    return min(fn() for _ in range(repeats))


def design_schedule(spec: RoundSpec, design: str) -> Schedule:
    """``default``: the target-charged design (its halting test filled in); ``paper``: the paper's."""
    if design == "paper":
        return Schedule((spec,), design=PAPER)
    return Schedule((fill_tests(spec),))


def with_variant(sched: Schedule, variant: str) -> Schedule:
    """The schedule with per-client quotas and/or the burn-rate signal on (``variant``)."""
    if variant == "off":
        return sched
    extra: dict[str, object] = {}
    if "quotas" in variant:
        extra["quotas"] = {"share": 0.25, "eps": 0.1}
    if "burn" in variant:
        extra["burn"] = {"window": 500, "eps": 0.1}
    return Schedule.from_dict({**sched.to_dict(), **extra})


def engine_row(T: int, queries: int, repeats: int, design: str = "default", batch: int = BATCH,
               variant: str = "off") -> dict[str, object]:
    lam = 10
    spec = RoundSpec(T=T, lam=lam, R=10**12, c=10**9, eps_bt=0.5, delta_bt=1e-8 if design == "paper" else None,
                     alpha=0.1, m_S=100, m_D=T * lam)
    g = np.random.default_rng(0)
    x = g.random(T * lam)
    sched = with_variant(design_schedule(spec, design), variant)
    p = Predictor.create(Thresholds(), sched, x, (x >= 0.5).astype(np.int8), seed=0)
    plan = noise_plan(sched.design, sched.rounds[0])
    qs = g.random(queries)
    quotas = "quotas" in variant
    who = [f"client-{i % CLIENTS}" for i in range(batch)]  # CLIENTS interleaved clients per batch

    def engine() -> float:
        t0 = time.process_time()
        for i in range(0, queries, batch):
            if quotas:
                p.answer(qs[i : i + batch], clients=who[: min(batch, queries - i)])
            else:
                p.answer(qs[i : i + batch])
        return time.process_time() - t0

    sorted_t = np.sort(p.ensemble.to_arrays()["t"])  # the engine's own classifiers: the same tops
    rng = np.random.default_rng(1)

    def draws(scale: Fraction, n: int) -> NDArray[np.int64]:
        # the straightforward way: one exact draw call per noise per batch
        return noise.sample(rng, scale, n)

    def floor() -> float:
        t0 = time.process_time()
        for i in range(0, queries, batch):
            b = qs[i : i + batch]
            v = np.searchsorted(sorted_t, b, side="right")
            if plan.halt_query is not None:  # target-charged: z_j and xi_j, nothing else
                draws(plan.query, b.size)
                draws(plan.halt_query, b.size)
            else:  # paper: nu_j, and a fresh threshold noise mu after each top
                assert plan.threshold is not None
                w = v + draws(plan.query, b.size)
                draws(plan.threshold, int(np.count_nonzero((w >= plan.lo) & (w <= plan.hi))))
        return time.process_time() - t0

    # CPU seconds of this process, interleaved, best of each: the machine is shared, and wall-clock
    # blocks run back to back differed by +-30% under other sessions' load
    te, tf = math.inf, math.inf
    for _ in range(repeats):
        te, tf = min(te, engine()), min(tf, floor())
    row: dict[str, object] = {"design": design, "T": T, "engine_qps": queries / te, "floor_qps": queries / tf,
                              "ratio": tf / te}
    if batch != BATCH:
        row.update(batch=batch, variant=variant)
    return row


def constant_work_row(repeats: int, batches: int = 400) -> dict[str, object]:
    """``run_tct`` on the same batch of 1000 queries (500 L, then 500 tops) in a round whose top count
    is far below the halting threshold and in one within reach of it: the first query's halting noise
    is large, so C_n + max(xi) reaches c0 + rho_h in the near round (the removed shortcut's condition
    fails there and holds in the far one), yet at no query does the test fire."""
    n = SMALL_BATCH
    g = np.random.default_rng(3)
    T, lo, hi = 10**4, 4000, 6000
    v = np.where(np.arange(n) < n // 2, 1000, 5000).astype(np.int64)  # L, then tops (|z| <= 3)
    z = g.integers(-3, 4, size=n).astype(np.int64)
    xi = np.zeros(n, dtype=np.int64)
    xi[0] = 10**6  # only the first query's noise is large, while the batch's tops are still to come
    c0, c = 10**7, 2 * 10**7
    plan = NoisePlan(T, 10**12, lo, hi, Fraction(2), None, Fraction(8), Fraction(4), c, c0)
    far = bt.BTState(tops=0, rho_h=0)
    near = bt.BTState(tops=c0 - 10**6 - 100, rho_h=0)
    for state, shortcut in ((far, True), (near, False)):
        assert not bt.run_tct(v, z, xi, plan, state).halted
        assert (state.tops + n // 2 + int(xi.max()) < c0 + state.rho_h) is shortcut

    def timed(state: bt.BTState) -> float:
        t0 = time.process_time()
        for _ in range(batches):
            bt.run_tct(v, z, xi, plan, state)
        return (time.process_time() - t0) / batches * 1e6

    tf, tn = math.inf, math.inf
    for _ in range(max(repeats, 9)):  # CPU seconds, interleaved, best of each (a shared machine)
        tf, tn = min(tf, timed(far)), min(tn, timed(near))
    return {"batch": n, "far_us": tf, "near_us": tn, "ratio": tn / tf}


TRANSITION_CONCEPTS = ("thresholds", "intervals", "stumps")
STUMPS_D = 3


def _transition_points(concept: str) -> tuple[ConceptClass, Callable[[np.random.Generator, int], np.ndarray]]:
    if concept == "stumps":
        return from_spec({"name": "stumps", "d": STUMPS_D}), lambda g, n: g.random((n, STUMPS_D))
    return from_spec({"name": concept}), lambda g, n: g.random(n)


def transition_repeats(points: int, repeats: int, quick: bool) -> int:
    """More repeats where a transition is cheap: the minimum of a few milliseconds is noisy on a
    shared machine, and these cost little."""
    return max(repeats, min(21, (10**6 if quick else 10**7) // points))


def transition_row(points: int, repeats: int, concept: str = "thresholds") -> dict[str, object]:
    """One transition of ``points`` queries (m_D = R: all of them kept) for ``concept``, timed
    against ``np.sort`` of as many random floats; the ratio is of the minima over the repeats,
    with medians alongside.

    Each repeat answers a round and times the transition, then answers the next round and times
    the sort: both start from the state a round of answering leaves. That matters where first-touch
    memory is dear: on this repository's VM a page the process has not touched for a few seconds
    costs ~1.5 ms/MB to fault in (freed back to the host), recycled memory ~0.06 ms/MB (the
    ``memory`` row), so a sort timed right after a transition (on the scratch that transition just
    freed) is up to ~3x cheaper than the same sort after a round (at 10^7 points).
    ``sort_seconds_hot`` is that right-after time, for comparison."""
    lam = 10
    T = points // lam
    spec = RoundSpec(T=T, lam=lam, R=points, c=10**9, eps_bt=0.5, delta_bt=1e-8, alpha=0.1,
                     m_S=1000, m_D=points)
    c, draw = _transition_points(concept)
    g = np.random.default_rng(0)
    x = draw(g, points)
    y = (np.asarray(x).reshape(points, -1)[:, 0] >= 0.5).astype(np.int8)
    pts = g.random(points)

    def answer_round(p: Predictor) -> None:
        for i in range(0, points, 1 << 20):
            p.answer(draw(g, min(1 << 20, points - i)))
        assert p.phase is Phase.TRANSITION_DUE

    times, sorts, hot, cpu, cpu_sorts, cold, cpu_cold = [], [], [], [], [], [], []
    for r in range(repeats):
        p = Predictor.create(c, design_schedule(spec, "default"), x, y, seed=r)
        answer_round(p)  # its last batch began S_{i+1}'s order (PreparedOrder)
        c0 = time.process_time()
        times.append(_timed(p.transition))
        cpu.append(time.process_time() - c0)
        hot.append(_timed(lambda: np.sort(pts)))  # on the scratch the transition just freed
        answer_round(p)
        p._drop_prepared()  # as after a restore (waits for the job): the transition draws the order itself
        c0 = time.process_time()
        cold.append(_timed(p.transition))
        cpu_cold.append(time.process_time() - c0)
        answer_round(p)
        p._drop_prepared()  # nothing else on the second core while the baseline sorts
        c1 = time.process_time()
        sorts.append(_timed(lambda: np.sort(pts)))
        cpu_sorts.append(time.process_time() - c1)
    sec, sort_s = min(times), min(sorts)
    return {"points": points, "seconds": sec, "sort_seconds": sort_s, "ratio": sec / sort_s, "concept": concept,
            "repeats": repeats, "seconds_median": float(np.median(times)),
            "sort_seconds_median": float(np.median(sorts)),
            "ratio_median": float(np.median(times) / np.median(sorts)),
            "cpu_ratio": min(cpu) / max(min(cpu_sorts), 1e-9), "overlap": overlap.parallel(),
            "sort_seconds_hot": min(hot), "seconds_unprepared": min(cold), "ratio_unprepared": min(cold) / sort_s,
            "ratio_unprepared_median": float(np.median(cold) / np.median(sorts)),
            "cpu_ratio_unprepared": min(cpu_cold) / max(min(cpu_sorts), 1e-9)}


def memory_row(mb: int) -> dict[str, object]:
    """What touching ``mb`` MB of fresh memory costs, in ms per MB: after 3 s idle (what a large
    transition gets after a round of answering, on a VM that hands freed pages back to its host
    within about 2 s) and right after the same amount was freed (recycled pages)."""
    def touch() -> float:
        t0 = time.perf_counter()
        a = np.ones(mb << 17)  # mb MB of float64, every page written
        t = time.perf_counter() - t0
        del a
        return t

    touch()
    time.sleep(3.0)
    fresh = touch()
    recycled = touch()
    return {"megabytes": mb, "fresh_ms_per_mb": fresh * 1e3 / mb, "recycled_ms_per_mb": recycled * 1e3 / mb}


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run, for CI)")
    ap.add_argument("--concept", choices=(*TRANSITION_CONCEPTS, "all"), default="thresholds",
                    help="concept class of the transition rows (default: thresholds)")
    ap.add_argument("--variants", nargs="*", choices=VARIANTS, default=list(VARIANTS),
                    help="the small-batch engine rows to run (default: all)")
    args = ap.parse_args(argv)
    Ts = [10**4, 10**5] if args.quick else [10**4, 10**5, 10**6]
    sizes = [10**5, 10**6] if args.quick else [10**5, 10**6, 10**7]
    queries = 1 << 18 if args.quick else 1 << 21
    repeats = 2 if args.quick else 3
    engine_repeats = 3 if args.quick else 7
    out: dict[str, list[dict[str, object]]] = {"engine": [], "transition": [], "memory": [], "constant_work": []}
    for design in ("default", "paper"):
        for T in Ts:
            print(f"engine {design} T={T} ...", file=sys.stderr)
            out["engine"].append(engine_row(T, queries, engine_repeats, design))
    for variant in args.variants:
        print(f"engine default T={Ts[0]} batch={SMALL_BATCH} {variant} ...", file=sys.stderr)
        out["engine"].append(engine_row(Ts[0], queries // 4, engine_repeats, "default", SMALL_BATCH, variant))
    print("constant work ...", file=sys.stderr)
    out["constant_work"].append(constant_work_row(engine_repeats))
    concepts = TRANSITION_CONCEPTS if args.concept == "all" else (args.concept,)
    for concept in concepts:
        for n in sizes:
            reps = transition_repeats(n, repeats, args.quick)
            print(f"transition {concept} points={n} x{reps} ...", file=sys.stderr)
            out["transition"].append(transition_row(n, reps, concept))
    out["memory"].append(memory_row(64 if args.quick else 300))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
