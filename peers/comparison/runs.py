"""Building a method at n examples of the task and running it on queries (everlast with an explicit
small schedule, since the planner's n is far too large to run)."""

from __future__ import annotations

import math
import time
from typing import Any

from everlast.adversary_sim.iid import Task
from everlast.engine.design import PAPER
from everlast.engine.planner import Certificate, certify, learning
from everlast.engine.planner import bt as bt_math
from everlast.engine.schedule import RoundSpec, Schedule
from everlast.peers import design, evaluate, registry
from everlast.peers.base import PeerError, PrivacyAccounting, StreamPredictor
from everlast.peers.comparison.settings import EVERLAST_NAMES, HALTS, METHODS, QUERY_PRIVACY_NOTE, Settings


def everlast_run_schedule(n: int, s: Settings, halts: str) -> tuple[Schedule, Certificate, dict[str, Any]]:
    """An explicit small schedule everlast can run with n examples, and its certificate.

    The paper's design (not query-private; the runs measure answers, not query privacy). One round,
    repeated: chunks of lam = ``design.chunk_size(alpha)`` (the peers' chunk size),
    T = floor(r1 n / lam) chunks, band gamma = alpha, R = m_D = lam T (each round's D-hat supplies the
    next round's labeled set), m_S from Lemma C.2 (``learning.labelboost_size``), the halt budget c of
    ``halts`` (``learning.halt_budget``, k = 2), delta' from Lemma C.3's gap rule (the certificate
    itself uses discrete Theorem B with delta_mu = delta'). Among r1 in {1, 1/2, 1/4, 1/8} and eps'
    in a grid of (0, 1) it keeps the one with the smallest certified training epsilon (tight
    accounting). When none certifies anything (n too small for Theorem B's gap condition), it runs
    r1 = 1, eps' = 0.5 and reports the certificate's +inf."""
    lam = design.chunk_size(s.alpha)
    gamma = s.alpha
    best: tuple[float, Schedule, Certificate, dict[str, Any]] | None = None
    fallback: tuple[float, Schedule, Certificate, dict[str, Any]] | None = None
    for r1 in (1.0, 0.5, 0.25, 0.125):
        T = int(r1 * n) // lam
        if T < 1:
            continue
        for eps_bt in (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9):
            d_bt = min(bt_math.min_delta(gamma, eps_bt, T), 0.5)
            m_D = lam * T
            c = learning.halt_budget(halts, m_D, s.alpha, gamma, lam, k=2.0)  # type: ignore[arg-type]
            spec = RoundSpec(T=T, lam=lam, R=m_D, c=c, eps_bt=eps_bt, delta_bt=d_bt, alpha=s.alpha,
                             m_S=min(m_D, learning.labelboost_size(m_D, s.alpha, s.beta, 1)), m_D=m_D,
                             beta=s.beta)
            sched = Schedule((spec,), repeat_last=True, design=PAPER)
            cert = certify(sched, n, "tight", s.delta)
            info = {"r1": r1, "T": T, "lam": lam, "R": m_D, "c": c, "eps_bt": eps_bt, "delta_bt": d_bt,
                    "m_S": spec.m_S, "m_D": m_D, "halts": halts}
            cand = (cert.epsilon_training, sched, cert, info)
            if math.isfinite(cand[0]) and (best is None or cand[0] < best[0]):
                best = cand
            if fallback is None or (r1 == 1.0 and eps_bt == 0.5):
                fallback = cand
    chosen = best if best is not None else fallback
    if chosen is None:
        raise PeerError(f"n = {n} is smaller than one chunk of {lam} examples")
    _, sched, cert, info = chosen
    return sched, cert, info


def _everlast_privacy(cert: Certificate) -> PrivacyAccounting:
    reason = cert.training_reason or ""
    return PrivacyAccounting(
        epsilon=cert.epsilon_training,
        delta=cert.delta_training,
        protects_queries=False,
        note=("GenericBBL with an explicit small schedule; training epsilon from engine.planner.certify "
              f"(tight){': ' + reason if reason else ''}; " + QUERY_PRIVACY_NOTE),
    )


def build_peer(name: str, n: int, s: Settings, task: Task, **kw: Any) -> tuple[StreamPredictor, dict[str, Any]]:
    """Build method ``name`` on n examples of ``task`` (extra info for the report)."""
    m = next(mm for mm in METHODS if mm.name == name)
    info: dict[str, Any] = {}
    if name in EVERLAST_NAMES:
        halts = dict(HALTS)[name]
        sched, cert, info = everlast_run_schedule(n, s, halts)
        info = {**info, "epsilon_training": cert.epsilon_training,
                "epsilon_training_reason": cert.training_reason or None,
                "epsilon_queries_conditional": cert.epsilon_queries_conditional,
                "meets_target": cert.epsilon_training <= s.epsilon}
        kw = {**kw, "schedule": sched, "privacy": _everlast_privacy(cert)}
    if name == "private_learner_grid":
        kw = {"grid_size": s.grid_size, "grid_bounds": (0.0, 1.0), **kw}
    peer = registry.build(m.peer, "thresholds", n, s.epsilon, s.delta, s.alpha, seed=s.seed, task=task, **kw)
    return peer, info


def run_one(name: str, n: int, queries: int, s: Settings, task: Task, **kw: Any) -> dict[str, Any]:
    """Build and run one method; a method that cannot be built at n is reported with the reason."""
    t0 = time.perf_counter()
    try:
        peer, info = build_peer(name, n, s, task, **kw)
    except PeerError as exc:
        return {"n": n, "status": "not_built", "reason": str(exc), "answered_before_refusal": None}
    r = evaluate.run_peer(peer, task, queries, seed=s.seed + 1)
    out: dict[str, Any] = {
        "n": n,
        "status": "ok",
        "queries": r["queries"],
        "answered_before_refusal": r["answered_before_refusal"],
        "refused": r["refused"] > 0,
        "error_rate": r["error_rate_before_refusal"],
        "error_bound": registry.error_bound(peer, s.alpha),
        "epsilon": r["epsilon"],
        "delta": r["delta"],
        "max_queries": r["max_queries"],
        "seconds": time.perf_counter() - t0,
    }
    if name in EVERLAST_NAMES:
        out["round_reached"] = peer.predictor.round  # type: ignore[attr-defined]
        out["schedule"] = info
        out["epsilon_reason"] = info.get("epsilon_training_reason")
    return out


def run_horizon(name: str, n: int, horizon: int, s: Settings, task: Task) -> dict[str, Any]:
    """Run a peer built for ``horizon`` at its computed n on ``horizon`` queries."""
    kw: dict[str, Any] = {"horizon": horizon} if name in ("dwork_feldman", "sparse_vector") else {}
    r = run_one(name, n, horizon, s, task, **kw)
    if r["status"] == "ok":
        r["confirmed"] = r["answered_before_refusal"] >= horizon
    return r
