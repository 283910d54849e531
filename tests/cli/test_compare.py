"""``everlast compare``: the JSON contract, the docs it writes, and the pieces of its computation.

Small options keep it fast: one run size, few queries, small runs only.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from everlast.cli import compare as cmp
from everlast.cli.main import main
from everlast.peers import accounting, sample_complexity

SMALL = ["--n", "20000", "--queries", "1000", "--max-run-n", "300000", "--horizon", "1000", "--horizon", "10000",
         "--domain-sizes", "2^8", "--domain-sizes", "2^40", "--domain-sizes", "inf"]
CONTRACT = {"epsilon", "delta", "alpha", "horizons", "methods"}
METHOD_CONTRACT = {"name", "n_required", "computed_or_run", "queries_answered_at_n"}


@pytest.fixture(scope="module")
def result() -> dict[str, Any]:
    """``everlast compare --json`` with small options, parsed (stdout must be exactly one object)."""
    res = CliRunner().invoke(main, ["compare", "--json", *SMALL])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1
    obj = json.loads(lines[0])
    assert isinstance(obj, dict)
    return obj


def _by_name(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in result["methods"]}


def test_json_contract(result: dict[str, Any]) -> None:
    assert set(result) >= CONTRACT
    assert (result["epsilon"], result["delta"], result["alpha"]) == (1.0, 1e-6, 0.1)
    assert result["horizons"] == [1000, 10000]  # --horizon; the default is 10^3 .. 10^9
    from everlast.peers.comparison.settings import Settings

    assert Settings().horizons == tuple(10**e for e in range(3, 10))
    names = [m["name"] for m in result["methods"]]
    assert {"nonprivate", "dwork_feldman", "sparse_vector", "private_learner", "private_learner_float64",
            "private_learner_grid", "dagan_feldman", "everlast", "everlast_split_votes"} <= set(names)
    for m in result["methods"]:
        assert set(m) >= METHOD_CONTRACT
        assert len(m["n_required"]) == len(result["horizons"]) == len(m["computed_or_run"])
        assert set(m["computed_or_run"]) <= {"computed", "run"}
        assert all(n is None or (isinstance(n, int) and n > 0) for n in m["n_required"])
        assert len(m["queries_answered_at_n"]) == len(result["n_values"]) == 1
        for q in m["queries_answered_at_n"]:
            assert q is None or 0 <= q <= result["queries"]


def test_nulls_where_impossible_and_runs_where_small(result: dict[str, Any]) -> None:
    m = _by_name(result)
    # no private learner for thresholds on the reals: null at every horizon, never run
    h = len(result["horizons"])
    assert m["private_learner"]["n_required"] == [None] * h
    assert m["private_learner"]["computed_or_run"] == ["computed"] * h
    assert m["private_learner"]["queries_answered_at_n"] == [None]
    # Dwork-Feldman at Q = 1000 needs < 300000 examples: run, and it answered the 1000 queries
    assert m["dwork_feldman"]["computed_or_run"][0] == "run"
    check = m["dwork_feldman"]["run_checks"][0]
    assert check["confirmed"] and check["answered_before_refusal"] == 1000
    assert m["dwork_feldman"]["computed_or_run"][1:] == ["computed"] * (h - 1)
    # n grows with the horizon for the composing peers, not for everlast
    for name in ("dwork_feldman", "sparse_vector", "dagan_feldman"):
        ns = m[name]["n_required"]
        assert ns == sorted(ns) and ns[-1] > 2 * ns[0]  # ~sqrt(10) from 10^3 to 10^4 queries
    for name in cmp.EVERLAST_NAMES:
        ns = m[name]["n_required"]
        assert len(set(ns)) == 1 and ns[0] is not None
        assert m[name]["computed_or_run"] == ["computed"] * h
    # the default design with the realistic halt budget is proven query-private; with the paper's
    # c = 64 alpha R its rounds exceed what the engine counts (R > 2^62): planned, not runnable
    assert m["everlast_split_votes"]["query_privacy_proven"] is True


def test_the_served_learner_rows_are_the_engine_mechanism_computed_and_run(result: dict[str, Any]) -> None:
    from everlast.engine.learner.ordinals import FLOAT64_POINTS
    from everlast.engine.planner import learner as pl

    m = _by_name(result)
    f64, grid = m["private_learner_float64"], m["private_learner_grid"]
    # Theorem L2 for expected error <= alpha; above the planner's (alpha, beta) = (0.1, 0.05) form, 2,229
    n = pl.n_expected_error(1.0, 0.1, pl.ln_hypotheses("thresholds", FLOAT64_POINTS)).n_required
    h = len(result["horizons"])
    assert f64["n_required"] == [n] * h and 2229 < n < 2600
    assert grid["n_required"][0] == pl.n_expected_error(1.0, 0.1, pl.ln_hypotheses("thresholds", 2**32)).n_required
    for row in (f64, grid):
        assert row["computed_or_run"] == ["run"] + ["computed"] * (h - 1)  # Q = 1000 fits --queries
        check = row["run_checks"][0]
        assert check["confirmed"] and check["error_rate"] <= 0.1 and check["epsilon"] == 1.0 and check["delta"] == 0.0
        run = row["runs"][0]
        assert run["status"] == "ok" and not run["refused"] and run["answered_before_refusal"] == 1000
        assert row["protects_queries"] is True and "exactly" in row["privacy"]
    rows = {r["domain_size"]: r for r in result["domain_effect"]["rows"]}
    assert rows[2**40]["private_learner_n"] == pl.n_expected_error(
        1.0, 0.1, pl.ln_hypotheses("thresholds", 2**40)).n_required
    assert result["domain_effect"]["float64_n"] == n


def test_everlast_numbers_are_honest(result: dict[str, Any]) -> None:
    m = _by_name(result)
    n_split = m["everlast_split_votes"]["n_required"][0]
    n_paper = m["everlast"]["n_required"][0]
    assert n_split < n_paper
    plan = result["everlast_plans"]["everlast_split_votes"]
    # the planner's default design is the cheapest one whose query privacy is proven (docs/privacy/genericbbl.md 4-5)
    assert plan["epsilon_training"] <= 1.0 * (1 + 1e-9) and plan["query_privacy_proven"] is True
    assert plan["epsilon_queries"] is not None and plan["epsilon_queries"] <= 1.0 * (1 + 1e-9)
    # the small-schedule runs report their own (weak or missing) certificate, never the target
    for name in cmp.EVERLAST_NAMES:
        for r in m[name]["runs"]:
            assert r["status"] == "ok" and r["schedule"]["meets_target"] is False
            assert r["epsilon"] is None or r["epsilon"] > 1.0
    # Dwork-Feldman needs fewer examples at these short horizons; it passes everlast's n (7.29e7 at
    # epsilon 1) between 10^7 and 10^9 queries (its n at Q = 10^9 is 1.96e8: docs/COMPARISON.md)
    assert all(n < n_split for n in m["dwork_feldman"]["n_required"])
    cross = {(c["peer"], c["everlast"]): c for c in result["crossovers"]}
    q_star = cross[("dwork_feldman", "everlast_split_votes")]["q_star"]
    assert 1e7 < q_star < 1e9
    assert cross[("dwork_feldman", "everlast")]["q_star"] > q_star


def test_domain_effect(result: dict[str, Any]) -> None:
    rows = {r["domain_size"]: r for r in result["domain_effect"]["rows"]}
    assert rows[None]["private_learner_n"] is None
    assert rows[2**8]["private_learner_n"] < rows[2**40]["private_learner_n"]
    assert rows[2**8]["everlast_split_votes_n"] == rows[2**40]["everlast_split_votes_n"] == rows[None][
        "everlast_split_votes_n"]
    assert rows[2**40]["run_at_computed_n"]["status"] == "ok"
    assert rows[2**40]["private_learner_computed_or_run"] == "run"


def test_docs_command_writes_the_files(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["compare", *SMALL, "--queries", "300", "--docs", str(tmp_path / "docs")])
    assert res.exit_code == 0, res.output
    md = tmp_path / "docs" / "COMPARISON.md"
    text = md.read_text(encoding="utf-8")
    for f in cmp.PLOT_FILES:
        png = tmp_path / "docs" / "img" / f
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"img/{f}" in text
    assert "## For the README" in text and "## Comparison" in text
    assert "everlast compare" in text and "query privacy is proven" in text
    assert "loses" in text
    assert "wrote" in res.stdout


def test_extrapolation_matches_the_exact_accountant() -> None:
    s = cmp.Settings()
    exact, is_exact = cmp.eps0_at(10**18, s)
    assert is_exact
    limit, is_exact = cmp.eps0_at(1e19, s)
    assert not is_exact
    assert limit * math.sqrt(1e19) == pytest.approx(exact * 1e9, rel=1e-5)
    # continuity of Dwork-Feldman's n across the switch (sqrt(10) apart, up to the ceiling)
    n18, _ = cmp.extended_n("dwork_feldman", 1e18, s)
    n19, _ = cmp.extended_n("dwork_feldman", 1e19, s)
    assert n19 / n18 == pytest.approx(math.sqrt(10), rel=1e-4)
    assert accounting.max_eps0(10**6, 1.0, 1e-6) * 1e3 == pytest.approx(cmp.gdp_mu(1.0, 1e-6), rel=2e-3)


def test_crossover_is_where_the_peer_passes_everlast() -> None:
    s = cmp.Settings()
    n_target = sample_complexity.dwork_feldman_n(10**6, 1.0, 1e-6, 0.1)
    c = cmp.crossover("dwork_feldman", n_target, s)
    assert c["how"] == "exact" and 10**5 < c["q_star"] <= 1.01 * 10**6
    assert cmp.extended_n("dwork_feldman", c["q_star"], s)[0] > n_target
    assert cmp.extended_n("dwork_feldman", c["q_star"] / 1.01, s)[0] <= n_target


def test_everlast_run_schedule_reports_its_certificate() -> None:
    s = cmp.Settings()
    sched, cert, info = cmp.everlast_run_schedule(1_000_000, s, "split-votes")
    assert sched.initial_size <= 1_000_000 and info["T"] == sched.rounds[0].T
    assert math.isfinite(cert.epsilon_training) and cert.epsilon_training > 1.0  # weak, but certified
    _, cert_small, _ = cmp.everlast_run_schedule(20_000, s, "split-votes")
    assert cert_small.epsilon_training == math.inf and cert_small.training_reason


@pytest.mark.parametrize(("text", "value"), [("2^8", 256), ("1000", 1000), ("1e6", 10**6), ("inf", None)])
def test_domain_option(text: str, value: int | None) -> None:
    assert cmp._domain(text) == value


def test_formatting() -> None:
    assert cmp.fmt_n(4029) == "4,029"
    assert cmp.fmt_n(195_644_094) == "1.96e8"
    assert cmp.fmt_n(None) == "—"
    assert cmp.fmt_sci(6.116e19) == "6.1e19"
