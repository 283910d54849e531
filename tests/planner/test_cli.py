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


def test_json_contract_papers_design() -> None:
    d = _one_json(_run("--concept", "thresholds", "--epsilon", "1", "--delta", "1e-6", "--alpha",
                       "0.1", "--halting", "paper", "--restarts", "per-top", "--no-designs",
                       "--json").output)
    assert set(d) >= CONTRACT
    assert isinstance(d["n_required"], int) and d["n_required"] > 10**18
    assert d["accounting"] == "tight" and d["delta"] == pytest.approx(1e-6)
    assert d["epsilon_training"] == pytest.approx(1.0, rel=1e-3)
    # the paper's design is never printed as query-private (issue 8): null + reason
    assert d["epsilon_queries"] is None and "issue 8" in d["epsilon_queries_reason"]
    assert d["epsilon"] is None and d["epsilon_reason"]
    assert d["query_private"] is False and d["conditional_on"] is None
    assert d["epsilon_queries_conditional"] <= 1.0 + 1e-9
    assert (d["halting"], d["restarts"]) == ("paper", "per-top")
    for s in d["steps"]:
        assert {"name", "lemma", "epsilon", "delta"} <= set(s)
        if s["epsilon"] is None:
            assert s["epsilon_reason"]
    for r in d["schedule"]:
        assert {"round", "T", "lambda", "R", "c"} <= set(r)
    assert "epsilon_achievable" not in d and "designs" not in d


def test_json_default_design_is_query_private_and_lists_designs() -> None:
    d = _one_json(_run("--epsilon", "1", "--halts", "split-votes", "--json").output)
    assert set(d) >= CONTRACT
    assert d["query_private"] is True and d["conditional_on"] is None
    assert (d["halting"], d["restarts"]) == ("noisy", "private")
    assert d["epsilon_queries"] <= 1.0 + 1e-9 and d["epsilon_training"] <= 1.0 + 1e-9
    assert d["epsilon"] == pytest.approx(max(d["epsilon_training"], d["epsilon_queries"]))
    q0 = next(s for s in d["steps"] if s["name"].startswith("in-round answers"))
    assert "Theorem Q" in q0["lemma"] and q0["valid"]
    assert q0["epsilon"] == pytest.approx(d["design"]["eps_h"] + d["design"]["eps_r"])
    r1 = d["schedule"][0]
    assert r1["halt_eps"] == d["design"]["eps_h"] and r1["block_cap"] >= r1["restart_threshold"]
    names = {(x["halting"], x["restarts"], x["conditional_on"]) for x in d["designs"]}
    assert len(names) == 10 and ("noisy", "private", "Lemma S") in names
    keys = {"halting", "restarts", "n_required", "epsilon_training", "epsilon_queries",
            "query_private", "conditional_on", "in_round", "default"}
    for x in d["designs"]:
        assert keys <= set(x)
        if x["conditional_on"] or x["restarts"] == "per-top":
            assert x["query_private"] is False and x["epsilon_queries"] is None
    (default,) = [x for x in d["designs"] if x["default"]]
    assert default["n_required"] == d["n_required"]
    sound = [x for x in d["designs"] if x["query_private"]]
    assert default["n_required"] == min(x["n_required"] for x in sound)
    assert d["cheapest_sound_design"] == "noisy+private"
    lemma_s = next(x for x in d["designs"] if x["conditional_on"])
    assert lemma_s["epsilon_training"] is None and lemma_s["epsilon_conditional"] <= 1.0 + 1e-9


def test_json_with_too_little_data_is_null_with_reason() -> None:
    d = _one_json(_run("--epsilon", "1", "--n", "1000000", "--no-designs", "--json").output)
    assert d["epsilon_achievable"] is None and "n = 1000000" in d["epsilon_achievable_reason"]


def test_json_with_enough_data_reports_achievable_epsilon() -> None:
    d = _one_json(_run("--epsilon", "1", "--halts", "split-votes", "--halting", "paper",
                       "--restarts", "per-top", "--no-designs", "--n", str(10**14), "--json").output)
    assert 0.2 < d["epsilon_achievable"] < 1.0
    assert d["epsilon_achievable_n_required"] <= 10**14


def test_paper_accounting_json() -> None:
    d = _one_json(_run("--accounting", "paper", "--epsilon", "8", "--no-designs", "--json").output)
    assert set(d) >= CONTRACT
    assert d["accounting"] == "paper"
    assert d["n_required"] == pytest.approx(1.66e25, rel=6e-3)
    assert d["runnable"] is False and "D.6" in d["not_runnable_reason"]


@pytest.mark.parametrize("args", [["--concept", "intervals"], ["--concept", "stumps", "--d", "10"],
                                  ["--concept", "finite", "--vc-dim", "3"]])
def test_every_concept_class(args: list[str]) -> None:
    d = _one_json(_run(*args, "--halts", "split-votes", "--halting", "paper", "--restarts",
                       "per-top", "--no-designs", "--json").output)
    assert d["targets"]["vc_dim"] == {"intervals": 2, "stumps": 6, "finite": 3}[args[1]]
    assert any("heuristic" in w for w in d["warnings"])


def test_finite_needs_vc_dim() -> None:
    res = CliRunner().invoke(plan, ["--concept", "finite"])
    assert res.exit_code == 2 and "--vc-dim" in res.output


def test_readable_output_says_what_the_data_buys() -> None:
    out = _run("--epsilon", "1", "--n", "1000000", "--halting", "paper", "--restarts", "per-top",
               "--no-designs").output
    assert "certifies no finite epsilon" in out and "epsilon = 1 needs n = 3.68e18" in out
    assert "NOT PROVEN" in out and "Lemma C.3" in out


def test_readable_output_of_the_default_reports_designs() -> None:
    out = _run("--epsilon", "8", "--halts", "split-votes").output
    assert "design: halting = noisy, restarts = private" in out
    assert "proven: docs/PRIVACY.md" in out and "Theorem Q" in out and "Theorem B" in out
    assert "| noisy+private **default** | proven |" in out
    assert "conditional on Lemma S" in out and "Cheapest design with proven query privacy" in out


def test_lemma_s_is_printed_as_conditional() -> None:
    out = _run("--epsilon", "1", "--halts", "split-votes", "--lemma-s", "--no-designs").output
    assert "CONDITIONAL ON LEMMA S" in out.upper() and "not a guarantee" in out
    d = _one_json(_run("--epsilon", "1", "--halts", "split-votes", "--lemma-s", "--no-designs",
                       "--json").output)
    assert d["conditional_on"] == "Lemma S" and d["query_private"] is False
    assert d["epsilon_training"] is None and d["epsilon_queries"] is None
    assert d["epsilon_training_conditional"] <= 1.0 + 1e-9
