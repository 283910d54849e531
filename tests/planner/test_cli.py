"""``everlast plan`` in-process (click's CliRunner): the JSON contract, the design flags (retired
values refused with the reason), ``--n``, and the readable output."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from everlast.cli.plan import plan
from everlast.engine.design import RETIRED
from everlast.engine.planner.api import EPS_H_CHOICES

CONTRACT = {"n_required", "epsilon", "epsilon_training", "epsilon_queries", "delta", "accounting",
            "steps", "schedule"}
ISSUE_8 = {"halting", "restarts", "query_private", "conditional_on", "design"}


def _run(*args: str, code: int = 0) -> Any:
    res = CliRunner().invoke(plan, list(args), catch_exceptions=False)
    assert res.exit_code == code, res.output
    return res


def _one_json(*args: str) -> dict[str, Any]:
    output = _run(*args, "--json").output
    obj, end = json.JSONDecoder().raw_decode(output)
    assert output[end:].strip() == "", "more than one JSON value on stdout"
    assert isinstance(obj, dict)
    json.loads(output, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    return obj


def test_default_flags_plan_the_target_charged_design_with_split_votes_halts() -> None:
    d = _one_json("--no-designs")  # epsilon 1, delta 1e-6, alpha 0.1: the target-charged design's first target
    assert set(d) >= CONTRACT | ISSUE_8
    assert d["halts"] == "split-votes" and d["accounting"] == "tight"
    assert d["design"] == {"name": "target-charged", "halting": "noisy", "restarts": "none",
                           "query_private_by_design": True, "eps_h": 0.1, "eps_r": None,
                           "block_bound": None, "quotas": None,
                           # the burn-rate signal `everlast serve` runs for planned targets (plan = serve)
                           "burn": {"window": d["schedule"][0]["R"] // 4, "eps": 0.05}}
    assert (d["halting"], d["restarts"]) == ("noisy", "none")
    assert d["query_private"] is True and d["conditional_on"] is None and d["meets_targets"] is True
    assert "engine's mechanism" in d["describes"]
    assert d["n_required"] <= 1e8  # the data-cost target at epsilon 1 (the levers of genericbbl.md 9)
    assert d["epsilon"] == pytest.approx(max(d["epsilon_training"], d["epsilon_queries"]))
    assert d["epsilon"] <= 1.0 + 1e-9 and d["delta"] <= 1e-6
    assert d["targets"]["eps_r"] is None and d["targets"]["block_bound"] is None
    assert d["targets"]["design"] == "target-charged"
    q0 = next(s for s in d["steps"] if s["name"].startswith("in-round answers"))
    # Theorem Q+: the halting test's eps_h plus the default burn-rate signal's eps_b
    assert "Theorem Q" in q0["lemma"] and q0["valid"]
    assert q0["epsilon"] == pytest.approx(d["schedule"][0]["halt_eps"] + d["design"]["burn"]["eps"])
    assert d["schedule"][0]["halt_eps"] in EPS_H_CHOICES  # the planner's choice (api.choose_eps_h)
    for s in d["steps"]:
        assert {"name", "lemma", "epsilon", "delta"} <= set(s)
    for r in d["schedule"]:
        assert {"round", "T", "lambda", "R", "c", "halt_eps", "halt_threshold"} <= set(r)
        assert not {"restart_eps", "restart_threshold", "block_cap"} & set(r)
        assert r["T_privacy"] is None  # no gap condition: T is set by accuracy
    assert d["rounds_listed"] == len(d["schedule"]) <= 12
    assert d["accuracy"]["bound"] <= d["targets"]["alpha"] and d["accuracy"]["reading"] == "per-query"
    assert set(d["ablation"]) == {"per_query_accuracy", "labelboost_direct", "band_width", "answer_margin",
                                  "chunk_sizing", "all_off"}
    # every answer of the first 10^12 queries is proven (Theorem A-infinity), both deltas within 1e-6
    assert d["accuracy"]["horizon_queries"] is None or d["accuracy"]["horizon_queries"] >= 1e12
    assert d["delta_training"] <= 1e-6 and d["delta_queries"] <= 1e-6 and d["n_required"] <= 1.1e8
    assert all(n is None or n >= d["n_required"] for n in d["ablation"].values())
    assert d["one_engine_rounds"] >= 1 and d["capacity"][0]["d_hat_points"] == d["schedule"][0]["m_D"]
    assert "epsilon_achievable" not in d and "designs" not in d


def test_paper_design_json() -> None:
    d = _one_json("--design", "paper", "--no-designs")
    assert set(d) >= CONTRACT | ISSUE_8
    assert d["design"]["name"] == "paper" and d["design"]["query_private_by_design"] is False
    assert d["epsilon_queries"] is None and "halting-channel audit" in d["epsilon_queries_reason"]
    assert d["epsilon"] is None and d["epsilon_reason"]
    assert d["query_private"] is False and d["epsilon_queries_conditional"] <= 1.0 + 1e-9
    assert d["epsilon_training"] <= 1.0 + 1e-9 and d["meets_targets"] is True
    # --halting or --restarts alone names the same design
    assert _one_json("--halting", "paper", "--no-designs")["n_required"] == d["n_required"]
    assert _one_json("--restarts", "per-top", "--no-designs")["n_required"] == d["n_required"]


@pytest.mark.slow  # plans both designs exactly: minutes on a loaded machine
def test_designs_list_both_designs() -> None:
    d = _one_json("--epsilon", "8")
    names = [x["name"] for x in d["designs"]]
    assert names == ["target-charged", "paper"]
    keys = {"halting", "restarts", "n_required", "epsilon_training", "epsilon_queries",
            "query_private", "conditional_on", "in_round", "default", "eps_r", "design"}
    for x in d["designs"]:
        assert keys <= set(x) and x["conditional_on"] is None and x["eps_r"] is None
    default, paper = d["designs"]
    assert default["default"] and default["query_private"] and default["n_required"] == d["n_required"]
    assert not paper["query_private"] and paper["epsilon_queries"] is None
    assert d["cheapest_sound_design"] == "target-charged"


@pytest.mark.parametrize(("args", "retired"), [(["--halting", "never"], "never"),
                                               (["--restarts", "private"], "private"),
                                               (["--restarts", "stateless"], "stateless"),
                                               (["--eps-r", "0.4"], "private"),
                                               (["--lemma-s"], "private")])
def test_retired_values_and_flags_are_refused_with_the_reason(args: list[str], retired: str) -> None:
    out = _run(*args, "--json", code=2).output
    assert RETIRED[retired][:60] in " ".join(out.split())


@pytest.mark.parametrize(("args", "message"), [
    (["--design", "paper", "--halting", "noisy"], "--design paper runs halting"),
    (["--halting", "noisy", "--restarts", "per-top"], "no design runs halting"),
    (["--halting", "sometimes"], "not one of noisy, paper"),
    (["--concept", "finite"], "--vc-dim"),
])
def test_bad_design_flags_are_usage_errors(args: list[str], message: str) -> None:
    out = _run(*args, code=2).output
    assert message in out or message in " ".join(out.split())


def test_n_with_too_little_data_is_null_with_reason() -> None:
    d = _one_json("--design", "paper", "--n", "1000000", "--no-designs")
    assert d["epsilon_achievable"] is None and "n = 1000000" in d["epsilon_achievable_reason"]


def test_n_with_enough_data_reports_the_achievable_epsilon() -> None:
    d = _one_json("--design", "paper", "--no-designs", "--n", str(10**14))
    assert 0.2 < d["epsilon_achievable"] < 1.0
    assert d["epsilon_achievable_n_required"] <= 10**14


def test_paper_accounting_describes_the_idealised_mechanism() -> None:
    d = _one_json("--accounting", "paper", "--epsilon", "8", "--no-designs")
    assert set(d) >= CONTRACT
    assert d["accounting"] == "paper" and "idealised" in d["describes"]
    assert d["n_required"] == pytest.approx(1.66e25, rel=6e-3)
    assert d["runnable"] is False and "exactly" in d["not_runnable_reason"]
    assert any("D.6" in w for w in d["warnings"]) and any("Theorem 5.1" in w for w in d["warnings"])


@pytest.mark.parametrize("args", [["--concept", "intervals"], ["--concept", "stumps", "--d", "10"],
                                  ["--concept", "finite", "--vc-dim", "3"]])
def test_every_concept_class(args: list[str]) -> None:
    d = _one_json(*args, "--design", "paper", "--no-designs")
    assert d["targets"]["vc_dim"] == {"intervals": 2, "stumps": 6, "finite": 3}[args[1]]
    assert any("split-votes" in w for w in d["warnings"])


def test_readable_output_names_the_design_and_lists_both() -> None:
    out = _run("--epsilon", "8").output
    assert "design: target-charged (halting noisy, restarts none, eps_h = 1)" in out
    assert "query privacy proven (Theorem Q)" in out and "proven: docs/privacy/genericbbl.md" in out
    assert "| target-charged **default** | proven |" in out and "| paper | NOT proven |" in out
    assert "Cheapest design with proven query privacy: target-charged" in out
    assert "| round | T | lambda | R | c | c0 | eps0 | m_S | m_D |" in out


def test_readable_output_of_the_paper_design_says_what_the_data_buys() -> None:
    out = _run("--design", "paper", "--n", "1000000", "--no-designs").output
    assert "certifies no finite epsilon" in out and "epsilon = 1 needs n = 4.3e12" in out
    assert "NOT PROVEN" in out and "NOT query-private" in out and "Theorem B" in out


@pytest.mark.slow
def test_issue_13_a_billion_examples() -> None:
    d = _one_json("--n", "1000000000", "--no-designs")
    assert d["epsilon_achievable"] <= 10.0 and d["epsilon_achievable_n_required"] <= 10**9
    assert d["query_private"] is True


@pytest.mark.slow
def test_plan_with_n_shows_the_schedule_those_examples_run() -> None:
    """`plan --n 1e7` prints the schedule 10^7 examples run, not the epsilon = 1 one."""
    out = _one_json("--n", "1e7", "--no-designs", "--no-ablation")
    at_n = out["plan_at_n"]
    assert at_n["n_required"] <= 1e7 < out["n_required"]
    assert abs(at_n["epsilon"] - out["epsilon_achievable"]) < 0.05 * at_n["epsilon"]
    text = _run("--n", "1e7", "--no-designs", "--no-ablation").output
    assert text.startswith("n = 1e7 examples cannot meet epsilon = 1 (it needs n = 7."), text[:200]
    assert f"; the schedule they run certifies epsilon = {at_n['epsilon']:.3g}:" in text.splitlines()[0]
    assert f"training set:  epsilon = {at_n['epsilon_training']:.3g}" in text


@pytest.mark.slow
def test_plan_with_more_n_than_needed_shows_the_plan_those_examples_run() -> None:
    """`plan --n 1e9` (more than epsilon = 1 needs) prints the chain of the plan 10^9 examples run at
    their best epsilon, not the epsilon = 1 plan's."""
    out = _one_json("--n", "1e9", "--no-designs", "--no-ablation")
    at_n = out["plan_at_n"]
    assert out["n_required"] <= 1e9 and at_n["n_required"] <= 1e9
    assert at_n["epsilon_training"] < 0.5 < out["epsilon_training"]
    text = _run("--n", "1e9", "--no-designs", "--no-ablation").output
    assert text.startswith("n = 1e9 examples meet epsilon = 1 (it needs n = "), text[:200]
    assert f"training set:  epsilon = {at_n['epsilon_training']:.3g}" in text
    assert f"training set:  epsilon = {out['epsilon_training']:.3g}" not in text


class _Bar:
    """Records what ``everlast plan`` tells its progress bar."""

    def __init__(self, total: int, desc: str, unit: str = "q") -> None:
        self.total, self.n, self.said, self.closed = total, 0, [], False

    def set_postfix_str(self, s: str) -> None:
        self.said.append(s)

    def update(self) -> None:
        self.n += 1

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("extra", [[], ["--no-designs", "--no-ablation"], ["--n", "1e7", "--no-ablation"]])
def test_plan_reports_each_phase_to_its_progress_bar(monkeypatch: pytest.MonkeyPatch, extra: list[str]) -> None:
    import everlast.cli.plan as plan_mod

    bars: list[_Bar] = []
    monkeypatch.setattr(plan_mod, "progress", lambda *a, **k: bars.append(_Bar(*a, **k)) or bars[-1])
    res = CliRunner().invoke(plan, ["--epsilon", "40", "--alpha", "0.45", "--json", *extra], catch_exceptions=False)
    json.loads(res.output)  # stdout stays one JSON object
    (bar,) = bars
    assert bar.closed and bar.n == bar.total
    assert "schedule" in bar.said
    assert ("ablation: all_off" in bar.said) == (extra == [])
    assert ("best epsilon" in bar.said) == ("--n" in extra)
