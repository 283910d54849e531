"""``everlast plan``: the JSON contract and the readable output."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from cli.plan import plan

CONTRACT = {"n_required", "epsilon", "epsilon_training", "epsilon_queries", "delta", "accounting",
            "steps", "schedule"}


def _run(*args: str) -> Any:
    res = CliRunner().invoke(plan, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res


def _one_json(output: str) -> dict[str, Any]:
    obj, end = json.JSONDecoder().raw_decode(output)
    assert output[end:].strip() == "", "more than one JSON value on stdout"
    assert isinstance(obj, dict)
    json.loads(output, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    return obj


def test_json_contract() -> None:
    d = _one_json(_run("--concept", "thresholds", "--epsilon", "1", "--delta", "1e-6", "--alpha",
                       "0.1", "--json").output)
    assert set(d) >= CONTRACT
    assert isinstance(d["n_required"], int) and d["n_required"] > 10**18
    assert d["accounting"] == "tight" and d["delta"] == pytest.approx(1e-6)
    assert d["epsilon_training"] == pytest.approx(1.0, rel=1e-3)
    # query privacy is never printed as proven (issue 8): null + reason, conditional number aside
    assert d["epsilon_queries"] is None and "issue 8" in d["epsilon_queries_reason"]
    assert d["epsilon"] is None and d["epsilon_reason"]
    assert d["query_private"] is False
    assert d["epsilon_queries_conditional"] <= 1.0 + 1e-9
    for s in d["steps"]:
        assert {"name", "lemma", "epsilon", "delta"} <= set(s)
        if s["epsilon"] is None:
            assert s["epsilon_reason"]
    for r in d["schedule"]:
        assert {"round", "T", "lambda", "R", "c"} <= set(r)
    assert "epsilon_achievable" not in d


def test_json_with_too_little_data_is_null_with_reason() -> None:
    d = _one_json(_run("--epsilon", "1", "--n", "1000000", "--json").output)
    assert d["epsilon_achievable"] is None and "n = 1000000" in d["epsilon_achievable_reason"]


def test_json_with_enough_data_reports_achievable_epsilon() -> None:
    d = _one_json(_run("--epsilon", "1", "--halts", "split-votes", "--n", str(10**14), "--json").output)
    assert 0.2 < d["epsilon_achievable"] < 1.0
    assert d["epsilon_achievable_n_required"] <= 10**14


def test_paper_accounting_json() -> None:
    d = _one_json(_run("--accounting", "paper", "--epsilon", "8", "--json").output)
    assert set(d) >= CONTRACT
    assert d["accounting"] == "paper"
    assert d["n_required"] == pytest.approx(1.66e25, rel=6e-3)
    assert d["runnable"] is False and "D.6" in d["not_runnable_reason"]


@pytest.mark.parametrize("args", [["--concept", "intervals"], ["--concept", "stumps", "--d", "10"],
                                  ["--concept", "finite", "--vc-dim", "3"]])
def test_every_concept_class(args: list[str]) -> None:
    d = _one_json(_run(*args, "--halts", "split-votes", "--json").output)
    assert d["targets"]["vc_dim"] == {"intervals": 2, "stumps": 6, "finite": 3}[args[1]]
    assert any("heuristic" in w for w in d["warnings"])


def test_finite_needs_vc_dim() -> None:
    res = CliRunner().invoke(plan, ["--concept", "finite"])
    assert res.exit_code == 2 and "--vc-dim" in res.output


def test_readable_output_says_what_the_data_buys() -> None:
    out = _run("--epsilon", "1", "--n", "1000000").output
    assert "certifies no finite epsilon" in out and "epsilon = 1 needs n = 3.68e18" in out
    assert "NOT PROVEN" in out and "Lemma C.3" in out
