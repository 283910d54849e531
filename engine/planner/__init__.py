"""Privacy planner for GenericBBL: from targets to a schedule, and from a schedule to the epsilon
it can honestly claim, step by step (see ``docs/PRIVACY.md``).

Pure math: no I/O, no printing. Entry points::

    from everlast.engine.planner import Targets, plan, certify, best_epsilon
    p = plan(Targets(epsilon=1.0, delta=1e-6, alpha=0.1))
    cert = certify(p.schedule, p.n_required, accounting="tight", delta=1e-6)

``certify`` accepts any schedule (also hand-written ones); a failed privacy precondition yields
epsilon = +inf with the reason, never a made-up number, and a schedule the engine cannot run
exactly is refused with the reason. Query privacy is certified for the target-charged design (the
default; Theorem Q); the paper's design reports it only conditionally
(``epsilon_queries_conditional``). The paper accounting's numbers describe the paper's idealised
mechanism (``Certificate.describes``). ``designs(targets)`` plans both designs.

``best_epsilon`` is ``engine.planner.search.best_epsilon`` (the search-only estimate locates the
answer, a few exact plans bracket it), the one best epsilon of the planner; the plain bisection with
the same contract is its oracle in the tests (tests/planner/bisection.py).
"""

from everlast.engine.planner.api import (
    Achievable,
    DesignCost,
    Plan,
    PlanInfeasible,
    Targets,
    cheapest_sound,
    designs,
    plan,
)
from everlast.engine.planner.chain import Certificate, certify, in_round_step
from everlast.engine.planner.search import best_epsilon
from everlast.engine.planner.steps import Check, Step

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
