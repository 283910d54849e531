"""Privacy planner for GenericBBL: from targets to a schedule, and from a schedule to the epsilon
it can honestly claim, step by step (see ``docs/PRIVACY.md``).

Pure math: no I/O, no printing. Entry points::

    from engine.planner import Targets, plan, certify, best_epsilon
    p = plan(Targets(epsilon=1.0, delta=1e-6, alpha=0.1))
    cert = certify(p.schedule, p.n_required, accounting="tight", delta=1e-6)

``certify`` accepts any schedule (also hand-written ones); a failed privacy precondition yields
epsilon = +inf with the reason, never a made-up number. Query privacy is certified for the designs
whose in-round step is proven (Theorem Q: noisy or never halting with private or stateless
restarts); the paper's design (per-top restarts, halting at c <= R) reports it only conditionally
(``epsilon_queries_conditional``). ``designs(targets)`` plans every design.
"""

from engine.planner.api import (
    Achievable,
    DesignCost,
    Plan,
    PlanInfeasible,
    Targets,
    best_epsilon,
    cheapest_sound,
    designs,
    plan,
)
from engine.planner.chain import Certificate, certify, in_round_step
from engine.planner.steps import Check, Step

__all__ = [
    "Achievable",
    "Certificate",
    "Check",
    "DesignCost",
    "Plan",
    "PlanInfeasible",
    "Step",
    "Targets",
    "best_epsilon",
    "certify",
    "cheapest_sound",
    "designs",
    "in_round_step",
    "plan",
]
