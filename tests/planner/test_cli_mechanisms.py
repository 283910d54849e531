"""``everlast plan --mechanism``: the private learner's JSON contract, the side-by-side comparison,
and ``--n`` in float notation."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from click.testing import CliRunner

from everlast.cli.plan import plan

CONTRACT = {"n_required", "epsilon", "epsilon_training", "epsilon_queries", "delta", "accounting",
            "steps", "schedule"}


def _run(*args: str, code: int = 0) -> Any:
    res = CliRunner().invoke(plan, list(args), catch_exceptions=False)
    assert res.exit_code == code, res.output
    return res


def _json(*args: str) -> dict[str, Any]:
    out = _run(*args, "--json").output
    d = json.loads(out)
    assert isinstance(d, dict)
    return d


@pytest.mark.parametrize(("concept", "limit"), [(("thresholds",), 5000), (("intervals",), 10_000),
                                                (("stumps", "--d", "10"), 10_000)])
def test_learner_targets_from_the_issue(concept: tuple[str, ...], limit: int) -> None:
    """The issue's limits are for the realizable bound; the agnostic n is larger, and both are reported
    whichever the headline follows."""
    d = _json("--mechanism", "private-learner", "--epsilon", "1", "--alpha", "0.1", "--concept", *concept,
              "--guarantee", "realizable")
    assert set(d) >= CONTRACT
    assert d["mechanism"] == "private-learner" and d["targets"]["guarantee"] == "realizable"
    assert isinstance(d["n_required"], int) and d["n_required"] <= limit
    agn = _json("--mechanism", "private-learner", "--epsilon", "1", "--alpha", "0.1", "--concept", *concept,
                "--guarantee", "agnostic")
    assert agn["targets"]["guarantee"] == "agnostic"
    assert agn["n_required"] == agn["accuracy"]["agnostic"]["n_required"] > d["n_required"]
    assert agn["accuracy"]["realizable"]["n_required"] == d["n_required"]
    assert d["epsilon_training"] == 1.0 and d["epsilon_queries"] == 0.0 and d["delta"] == 0.0
    assert d["query_private"] is True and d["schedule"] == []
    assert d["cheapest_mechanism"] == "private-learner"
    assert int(d["accuracy"]["hypotheses"]) > 2**64


def test_learner_with_n_and_a_declared_domain() -> None:
    d = _json("--mechanism", "private-learner", "--n", "1e9")
    assert d["epsilon_achievable_n"] == 10**9 and 0 < d["epsilon_achievable"] < 1e-4
    small = _json("--mechanism", "private-learner", "--domain-size", "1e3", "--guarantee", "agnostic")
    big = _json("--mechanism", "private-learner", "--guarantee", "agnostic")
    assert small["n_required"] < big["n_required"]
    assert small["accuracy"]["domain_size"] == "1000"


def test_learner_refuses_classes_it_does_not_have() -> None:
    d = _json("--mechanism", "private-learner", "--concept", "finite")
    assert d["n_required"] is None and "supports" in d["n_required_reason"]


@pytest.mark.parametrize("value", ["1e9", "1_000_000_000", "1000000000", "1.0e9", "1E9"])
def test_n_accepts_integers_and_exact_float_notation(value: str) -> None:
    d = _json("--mechanism", "private-learner", "--n", value)
    assert d["epsilon_achievable_n"] == 10**9


@pytest.mark.parametrize(("value", "msg"), [("1.5", "not a whole number"), ("1e-3", "not a whole number"),
                                            ("0", "smaller than the minimum"), ("-5", "smaller"),
                                            ("ten", "not a number"), ("inf", "not a whole number")])
def test_n_refuses_non_integral_values(value: str, msg: str) -> None:
    res = _run("--mechanism", "private-learner", "--n", value, code=2)
    assert msg in res.output


def test_all_mechanisms_side_by_side() -> None:
    d = _json("--mechanism", "all", "--no-designs", "--n", "1e6", "--guarantee", "agnostic")
    assert set(d) >= CONTRACT  # GenericBBL's plan keys stay
    names = [m["mechanism"] for m in d["mechanisms"]]
    assert names == ["generic-bbl", "private-learner"]
    bbl, pl = d["mechanisms"]
    assert bbl["n_required"] == d["n_required"] > 10**6  # more than the n given: GenericBBL does not fit
    assert pl["n_required"] == pl["agnostic"]["n_required"] < 6000 and pl["epsilon_queries"] == 0.0
    assert pl["guarantee"] == "agnostic" and pl["meets_targets_at_n"] is True
    assert d["cheapest_mechanism"] == "private-learner" and d["best_mechanism_at_n"] == "private-learner"
    text = _run("--mechanism", "all", "--no-designs", "--guarantee", "agnostic").output
    assert "Cheapest certified mechanism: private-learner" in text
    assert "follows the agnostic bound (Theorem L3" in text
    assert "the realizable bound (Theorem L2) needs n = 2229" in text


@pytest.mark.parametrize(("guarantee", "meets", "best"), [("agnostic", False, None),
                                                          ("realizable", True, "private-learner")])
def test_the_learner_at_n_follows_the_guarantee(guarantee: str, meets: bool, best: str | None) -> None:
    """Review of learner.md 8-9, finding 3: thresholds, epsilon 1, alpha 0.1, n = 3000 meet the realizable
    bound (2,229) but not the agnostic one (5,780), which the daemon checks by default."""
    d = _json("--mechanism", "all", "--no-designs", "--n", "3000", "--guarantee", guarantee)
    pl = d["mechanisms"][1]
    assert pl["meets_targets_at_n"] is meets and d["best_mechanism_at_n"] == best
    assert pl["n_required"] == (5780 if guarantee == "agnostic" else 2229)
    one = _json("--mechanism", "private-learner", "--n", "3000", "--guarantee", guarantee)
    assert one["mechanisms"][0]["meets_targets_at_n"] is meets
    assert (one["epsilon_achievable"] is None) is (guarantee == "agnostic")
    assert math.isclose(one["alpha_achievable"], one["accuracy"][guarantee].get("alpha_at_n",
                        one["accuracy"]["agnostic"]["excess_at_n"]))


def test_the_agnostic_epsilon_at_n_is_the_least_that_proves_alpha() -> None:
    d = _json("--mechanism", "private-learner", "--n", "20000", "--guarantee", "agnostic")
    e = d["epsilon_achievable"]
    assert 0 < e < 1 and d["accuracy"]["agnostic"]["epsilon_at_n"] == e
    at = _json("--mechanism", "private-learner", "--n", "20000", "--epsilon", str(e),
               "--guarantee", "agnostic")["accuracy"]["agnostic"]
    below = _json("--mechanism", "private-learner", "--n", "20000", "--epsilon", str(e * 0.999),
                  "--guarantee", "agnostic")["accuracy"]["agnostic"]
    assert at["excess_at_n"] <= 0.1 < below["excess_at_n"]


def test_default_output_is_unchanged_by_the_mechanism_flag() -> None:
    d = _json("--no-designs")
    assert "mechanisms" not in d and "mechanism" not in d


def test_all_mechanisms_when_genericbbl_is_infeasible() -> None:
    d = _json("--mechanism", "all", "--no-designs", "--accounting", "paper", "--design", "target-charged")
    assert d["n_required"] is None  # GenericBBL's infeasible object, unchanged ...
    bbl, pl = d["mechanisms"]  # ... plus the comparison
    assert bbl["n_required"] is None and bbl["reason"] and pl["n_required"] < 6000
    assert d["cheapest_mechanism"] == "private-learner"


def test_the_plans_default_guarantee_is_the_daemons() -> None:
    """Plan = serve: without --guarantee the plan follows the daemon's default (validated), its
    n_required is the validated one, and its epsilon at n is the least whose margin (Hoeffding form) is
    <= alpha -- the margin at that epsilon is <= alpha, just below it is not."""
    from everlast.daemon.config import LearnerConfig
    from everlast.engine.learner.validate import holdout_size
    from everlast.engine.planner.mechanisms import _hoeffding_margin

    assert LearnerConfig.model_fields["guarantee"].default == "validated"
    d = _json("--mechanism", "private-learner", "--n", "3000")
    assert d["targets"]["guarantee"] == "validated"
    assert d["n_required"] == d["accuracy"]["validated"]["n_required"] < d["accuracy"]["agnostic"]["n_required"]
    e, m = d["epsilon_achievable"], holdout_size(3000, 0.25)
    assert e == d["accuracy"]["validated"]["epsilon_at_n"] and 0 < e < 1
    assert _hoeffding_margin(m, e, 0.05) <= 0.1 < _hoeffding_margin(m, e * (1 - 2e-6), 0.05)
    assert d["mechanisms"][0]["meets_targets_at_n"] is True
    few = _json("--mechanism", "private-learner", "--n", "200")
    assert few["epsilon_achievable"] is None and "Theorem V" in few["epsilon_achievable_reason"]
    text = _run("--mechanism", "all", "--no-designs").output
    assert "follows the validated bound (Theorem V" in text
