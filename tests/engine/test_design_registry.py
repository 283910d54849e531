"""One registry of designs per layer, each keyed by the ``Design``: the engine's (``engine.design.SPECS``:
round noise and round fields), the planner's (``engine.planner.design_table.PLANNERS``: rules and round
solver) and the audits' (``adversary_sim.audit.games.AUDIT_ROUNDS``: rounds, scorer, adversaries). A
new design is one entry in each, and a design missing from any of them fails here, not at the first
plan or audit that reaches it."""

from __future__ import annotations

from everlast.adversary_sim.audit.games import AUDIT_ROUNDS
from everlast.engine import design as dz
from everlast.engine.design import SPECS, Design, spec_of
from everlast.engine.planner.design_rules import rules
from everlast.engine.planner.design_table import PLANNERS

DESIGNS = {Design.named(n) for n in dz._NAMES.values()}


def test_every_layer_registers_every_design_once() -> None:
    assert set(SPECS) == set(PLANNERS) == set(AUDIT_ROUNDS) == DESIGNS
    for d in DESIGNS:
        assert spec_of(d).design == d and rules(d).design == d and AUDIT_ROUNDS[d].design == d
        assert rules(d) is PLANNERS[d].rules


def test_each_design_entry_is_its_own() -> None:
    """The entries differ where the designs do (a copy-pasted entry would pass the key check)."""
    tc, paper = dz.DEFAULT, dz.PAPER
    assert spec_of(tc).noise is not spec_of(paper).noise
    assert spec_of(tc).check_fields is not spec_of(paper).check_fields
    assert PLANNERS[tc].solver is not PLANNERS[paper].solver
    assert AUDIT_ROUNDS[tc].halting_sweep and not AUDIT_ROUNDS[paper].halting_sweep
    assert AUDIT_ROUNDS[tc].probe_offset == 2.0 and AUDIT_ROUNDS[paper].probe_offset == -1.0
