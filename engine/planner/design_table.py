"""The planner's one registry of designs: for each design the engine runs, its rules (the privacy
chain's round receipts, its checks and refusals: ``design_rules``) and its round solver (sizing one
round for its budget: ``round_solvers``). The engine's side of a design is ``engine.design.SPECS``;
the audits' is ``adversary_sim.audit.games.AUDIT_ROUNDS`` (tests/engine/test_design_registry.py
checks that the three tables name the same designs)."""

from __future__ import annotations

from dataclasses import dataclass

from everlast.engine.design import DEFAULT, PAPER, Design
from everlast.engine.planner.design_rules import RULES, DesignRules
from everlast.engine.planner.round_solvers import PaperSolver, TargetChargedSolver


@dataclass(frozen=True, slots=True)
class PlannerDesign:
    """The planner's side of one design."""

    rules: DesignRules
    solver: type[TargetChargedSolver] | type[PaperSolver]


PLANNERS: dict[Design, PlannerDesign] = {
    DEFAULT: PlannerDesign(RULES[DEFAULT], TargetChargedSolver),
    PAPER: PlannerDesign(RULES[PAPER], PaperSolver),
}
