"""The availability audit through the embedded broker and a real daemon (``everlast audit --game
availability``): the README's boundary prober (client A) and an i.i.d. client (B) at the same time on
the compose sample's model. With its per-client quotas, A is refused with ``client-quota``, B is
answered in full, the model does not halt, and the daemon's log names A; without them the prober
halts the model and B's later queries are refused too (the behaviour before quotas)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from everlast.cli.audit import audit as audit_cmd


def play(*flags: str) -> dict[str, object]:
    r = CliRunner().invoke(audit_cmd, ["--game", "availability", "--json", *flags])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert isinstance(out, dict)
    return out


README = Path(__file__).resolve().parents[2] / "docs" / "AUDITS.md"


def readme_row(quotas: str) -> tuple[int, ...]:
    """docs/AUDITS.md's table figures (A ok, A refused, B ok, B refused) for quotas ``on`` or ``off``."""
    line = next(ln for ln in README.read_text().splitlines() if ln.startswith(f"| {quotas} "))
    return tuple(int(v.replace(",", "")) for v in re.findall(r"\d[\d,]*(?= /| \()|(?<=/ )\d[\d,]*", line))


def figures(out: dict[str, object]) -> tuple[int, ...]:
    a, b = out["clients"]["A"], out["clients"]["B"]  # type: ignore[index]
    return a["ok"], a["refused"], b["ok"], b["refused"]


@pytest.mark.broker
def test_with_quotas_the_prober_is_refused_and_the_other_client_answered_in_full() -> None:
    out = play()
    assert figures(out) == readme_row("on")  # the clients take turns: every run of seed 0 answers alike
    a, b = out["clients"]["A"], out["clients"]["B"]  # type: ignore[index]
    assert b == {"sent": 5_000, "ok": 5_000, "refused": 0, "reasons": {}}
    assert a["sent"] == 10_000 and a["refused"] > 5_000 and set(a["reasons"]) == {"client-quota"}
    assert out["halted"] is False and out["paused"] is False and out["round"] == 1 and out["invalid"] == 0
    assert out["quota_fired"] == ['"A"']  # the log line an operator reads names the client
    assert out["quotas"] == {"share": 0.2, "eps": 0.2}
    # the burn-rate signal saw the attack: well above B's share alone (~500 tops in 5,000 i.i.d. queries)
    assert out["burn_queries"] == 15_000 and out["burn_noisy_tops"] > 1_000  # type: ignore[operator]


@pytest.mark.broker
def test_without_quotas_the_prober_pauses_the_round_for_both_clients() -> None:
    out = play("--no-quotas")
    assert figures(out) == readme_row("off")
    a, b = out["clients"]["A"], out["clients"]["B"]  # type: ignore[index]
    assert out["halted"] is False and out["paused"] is True and out["quotas"] is None and out["quota_fired"] == []
    assert set(a["reasons"]) == {"round-paused"} and set(b["reasons"]) == {"round-paused"} and b["refused"] > 0
