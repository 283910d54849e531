"""Per-client quotas and the burn-rate signal in the daemon, without a broker: the configuration
(clear errors, merged into a schedule file, planned with the targets), the client header (the last one
wins, a missing or empty one is the anonymous client), the processor with the real engine (a client's
boundary queries are refused with ``client-quota`` while another client is answered, the firing names
the client, the burn-rate releases are summed per round), the same answers whatever the batching and
after the journal's round trip, the checkpoint's schedule against the configuration's, and the log
and metric plumbing (no client id in a label; the quota lines pass the rate limit)."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
from prometheus_client import generate_latest

from everlast.daemon import batch as codec
from everlast.daemon import journal
from everlast.daemon.config import load
from everlast.daemon.errors import ConfigError
from everlast.daemon.logs import UNLIMITED, RateLimit
from everlast.daemon.metrics import Metrics
from everlast.daemon.model import ModelRuntime
from everlast.daemon.partition import QUOTA_LOG_LINES, BurnTally, PartitionProcessor, Served, Step, show_client
from everlast.daemon.privacy import DEFAULT_BURN_WINDOWS, default_burn
from everlast.engine.burn import Burn, default_eps, planning_default
from everlast.engine.concepts import Thresholds
from everlast.engine.predictor import Predictor
from everlast.engine.quotas import Quotas
from everlast.engine.schedule import Schedule
from tests.daemon.fakes import Rec, labels_of

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "deploy" / "compose" / "sample"
QUOTAS = {"share": 0.2, "eps": 0.2}
"""c0_q = ceil(0.2 * 4,514) = 903 tops of the compose sample's round (docs/privacy/genericbbl.md 5.5)."""
BURN = {"window": 1000, "eps": 0.1}
BOUNDARY = 0.37
"""The sample's hidden threshold: the round's classifiers split there, so almost every query is a top."""


def write(tmp: Path, model: str = "", head: str = "") -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    p = tmp / "everlast.toml"
    p.write_text(f'{head}\n[[models]]\nid = "s"\ndata = "{SAMPLE / "train.csv"}"\n'
                 f'schedule = "{SAMPLE / "schedule.json"}"\n{model}\n')
    return p


def sample_predictor(quotas: dict[str, Any] | None = QUOTAS, burn: dict[str, Any] | None = BURN,
                     seed: int = 7) -> Predictor:
    d = json.loads((SAMPLE / "schedule.json").read_text())
    d.update({k: v for k, v in (("quotas", quotas), ("burn", burn)) if v is not None})
    data = np.loadtxt(SAMPLE / "train.csv", delimiter=",", skiprows=1)
    return Predictor.create(Thresholds(), Schedule.from_dict(d), data[:, 0], data[:, 1].astype(np.int8), seed=seed)


def recs(xs: list[float] | np.ndarray, clients: list[bytes | None], start: int = 0) -> list[Rec]:
    out = []
    for k, (x, c) in enumerate(zip(np.asarray(xs).tolist(), clients, strict=True)):
        h = [] if c is None else [("everlast-client", c)]
        out.append(Rec(start + k, b"s", msgpack.packb({"id": start + k, "x": x}), h, 1_700_000_000_000 + start + k))
    return out


def stream(n_a: int = 3_000, n_b: int = 3_000) -> list[Rec]:
    """Client A on the boundary, client B i.i.d., interleaved in chunks of 100 and 50."""
    g = np.random.default_rng(3)
    xs: list[float] = []
    who: list[bytes | None] = []
    a = b = 0
    while a < n_a or b < n_b:
        k = min(100, n_a - a)
        xs += [BOUNDARY] * k
        who += [b"A"] * k
        a += k
        k = min(50, n_b - b)
        xs += g.random(k).tolist()
        who += [b"B"] * k
        b += k
    return recs(xs, who)


def run(recs_: list[Rec], cut: int, p: Predictor | None = None) -> tuple[PartitionProcessor, list[Step]]:
    proc = PartitionProcessor(0, [Served("s", p or sample_predictor(), 0)], {"s"}, 0)
    steps = []
    for i in range(0, len(recs_), cut):
        part = recs_[i : i + cut]
        steps.append(proc.feed(codec.decode(part, 65_536), part[-1].offset + 1))
    return proc, steps


# -- configuration -----------------------------------------------------------------------------------


@pytest.mark.parametrize("model, msg", [
    ("quotas = { share = 1.5, eps = 0.1 }", r"models\.0\.quotas\.share: Input should be less than or equal to 1"),
    ("quotas = { share = 0.2, eps = 0 }", r"models\.0\.quotas\.eps: Input should be greater than 0"),
    ("quotas = { share = 0.2 }", r"models\.0\.quotas\.eps: Field required"),
    ("burn = { window = 0, eps = 0.01 }", r"models\.0\.burn\.window: Input should be greater than or equal to 1"),
    ("burn = true", r"burn = true names no window"),
    ("burn = { window = 10, eps = 0.01, every = 3 }", r"models\.0\.burn\.every: Extra inputs are not permitted"),
])
def test_quota_and_burn_settings_are_validated_with_the_setting_named(tmp_path: Path, model: str, msg: str) -> None:
    with pytest.raises(ConfigError, match=msg):
        load(write(tmp_path, model))


def test_the_private_learner_takes_no_quotas(tmp_path: Path) -> None:
    p = tmp_path / "l.toml"
    p.write_text(f'[[models]]\nid = "l"\ndata = "{SAMPLE / "train.csv"}"\nmechanism = "private-learner"\n'
                 'quotas = { share = 0.2, eps = 0.1 }\n[models.learner]\nepsilon = 1.0\n')
    with pytest.raises(ConfigError, match="'quotas' and 'burn' are GenericBBL's"):
        load(p)


def test_a_schedule_file_runs_the_configured_quotas_and_burn_and_its_certificate_charges_them(
        tmp_path: Path) -> None:
    plain = ModelRuntime.prepare(load(write(tmp_path / "a")).models[0])
    on = ModelRuntime.prepare(load(write(tmp_path / "b", "quotas = { share = 0.2, eps = 0.2 }\n"
                                                        "burn = { window = 1000, eps = 0.1 }")).models[0])
    assert plain.schedule is not None and plain.schedule.quotas is None and plain.schedule.burn is None
    assert on.schedule is not None and on.schedule.quotas == Quotas(0.2, 0.2) and on.schedule.burn == Burn(1000, 0.1)
    # Theorem Q+: eps_q + eps_b on every query (up to the certificate's rounding up); training side unchanged
    assert on.guarantee.epsilon_queries == pytest.approx(plain.guarantee.epsilon_queries + 0.3, abs=1e-3)
    assert on.guarantee.epsilon_training == plain.guarantee.epsilon_training
    assert on.guarantee.details["quotas"] == QUOTAS and on.guarantee.details["burn"] == BURN
    # a file that carries them too must say the same
    sched = json.loads((SAMPLE / "schedule.json").read_text()) | {"burn": {"window": 500, "eps": 0.1}}
    f = tmp_path / "s.json"
    f.write_text(json.dumps(sched))
    cfg = load(write(tmp_path / "c", "burn = { window = 1000, eps = 0.1 }")).models[0].model_copy(
        update={"schedule": f})
    with pytest.raises(ConfigError, match=r"the schedule file sets burn = \{'window': 500.*give it in one place"):
        ModelRuntime.prepare(cfg)
    off = load(write(tmp_path / "d", "burn = false")).models[0].model_copy(update={"schedule": f})
    with pytest.raises(ConfigError, match="burn = false, but the schedule file runs"):
        ModelRuntime.prepare(off)


def test_planned_models_run_the_burn_rate_signal_by_default_and_paper_accounting_refuses_quotas(
        tmp_path: Path) -> None:
    s = Schedule.from_dict(json.loads((SAMPLE / "schedule.json").read_text()))
    s = dataclasses.replace(s, burn=planning_default(1.0))
    assert default_burn(s).burn == Burn(s.rounds[0].R // DEFAULT_BURN_WINDOWS, default_eps(1.0))
    p = tmp_path / "t.toml"
    p.write_text(f'[[models]]\nid = "t"\ndata = "{SAMPLE / "train.csv"}"\nquotas = {{ share = 0.2, eps = 0.1 }}\n'
                 "[models.targets]\nepsilon = 1.0\ndelta = 1e-6\nalpha = 0.1\naccounting = \"paper\"\n")
    with pytest.raises(ConfigError, match="quotas and the burn-rate signal run with the target-charged design"):
        ModelRuntime.prepare(load(p).models[0])


# -- the client header ----------------------------------------------------------------------------


def test_the_client_is_the_last_client_header_and_a_missing_or_empty_one_is_anonymous() -> None:
    h = "everlast-client"
    assert codec.client_of([], h) is None and codec.client_of(None, h) is None
    assert codec.client_of([(h, b"")], h) is None
    assert codec.client_of([(h, b"forged"), ("x", b"1"), (h, b"gateway")], h) == b"gateway"
    assert codec.client_of([("Everlast-Client", b"A")], h) is None  # exact name: a gateway strips exactly it
    b = codec.decode(recs([0.1, 0.2, 0.3], [None, b"A", b""]), 65_536)
    assert b.clients == [None, b"A", None] and b.xarr is not None  # the fast path with client headers
    assert b.clients_of([1, 2]) == [b"A", None] and b.clients_of([0, 2]) == [None, None]
    assert codec.decode(recs([0.1, 0.2], [None, None]), 65_536).clients is None
    fast = codec.decode(recs([0.1, 0.2, 0.3], [b"A", b"", b"B"]), 65_536)  # one header each: list operations
    assert fast.clients == [b"A", None, b"B"] and fast.xarr is not None
    js = [Rec(0, b"s", b'{"id": 1, "x": 0.5}', [("content-type", b"application/json"), (h, b"J")])]
    d = codec.decode(js, 65_536, h)
    assert d.json_at == {0} and d.clients == [b"J"]
    assert codec.decode(recs([0.1], [b"A"]), 65_536, "tenant").clients is None  # the configured name only


def test_a_log_line_shows_a_client_quoted_and_escaped() -> None:
    assert show_client(b"acme-7") == '"acme-7"'
    assert show_client(b"a\nb\xff") == '"a\\nb\\\\xff"'
    assert "anonymous" in show_client(None)
    assert len(show_client(b"x" * 1000)) == 258


# -- the processor with the real engine -------------------------------------------------------------------


def test_a_client_over_its_share_is_refused_and_named_and_the_other_client_keeps_every_answer() -> None:
    rs = stream()
    proc, steps = run(rs, 1_000)
    labs = [d for s in steps for d in labels_of(s)]
    assert len(labs) == len(rs)  # one label record per query
    who = {r.offset: dict(r.headers).get("everlast-client") for r in rs}
    a = [d for d in labs if who[d["id"]] == b"A"]
    b = [d for d in labs if who[d["id"]] == b"B"]
    assert all(d["status"] == "ok" for d in b)
    refused = [d for d in a if d["status"] == "refused"]
    assert len(refused) > 1_000 and all(d["reason"].startswith("client-quota:") and d["label"] is None
                                        for d in refused)
    assert [d["status"] for d in a[: len(a) - len(refused)]] == ["ok"] * (len(a) - len(refused))  # then refused
    assert sum(s.quota_refused.get("s", 0) for s in steps) == len(refused)
    assert sum(s.quota_fired.get("s", 0) for s in steps) == 1
    events = [e for s in steps for e in s.events if e.kind == "quota"]
    assert len(events) == 1 and events[0].model == "s" and events[0].round == 1
    assert events[0].detail.startswith('"A" (offset ')  # the client, where; never a query value
    m = proc.models["s"]
    assert m.phase.value == "answering" and m.burn.round == 1 and m.burn.windows == len(rs) // 1_000
    # the burn-rate releases show the attack: far more than the i.i.d. client alone would spend
    assert m.burn.noisy_tops > 900


def test_the_answers_do_not_depend_on_batching_and_replay_from_the_journal_byte_for_byte() -> None:
    rs = stream(2_000, 1_000)
    _, one = run(rs, len(rs))
    _, many = run(rs, 137)

    def records(steps: list[Step]) -> list[tuple[Any, ...]]:
        return sorted(((k, v, tuple(h)) for s in steps for k, v, h in s.label_records()),
                      key=lambda t: msgpack.unpackb(t[1])["id"])

    assert records(one) == records(many)
    # the journal keeps each record's headers: a replay sees the same clients, hence the same answers
    rows = [journal.decode(journal.encode(rs[i : i + 500]), "q", 0) for i in range(0, len(rs), 500)]
    proc = PartitionProcessor(0, [Served("s", sample_predictor(), 0)], {"s"}, 0)
    replayed = [proc.replay(codec.decode(r, 65_536)) for r in rows]
    assert records(replayed) == records(one)


def test_without_quotas_the_client_header_changes_nothing() -> None:
    rs = stream(1_000, 500)
    plain = [(r.offset, r.key, r.value, [], r.timestamp) for r in rs]
    _, with_headers = run(rs, 500, sample_predictor(None, None))
    _, without = run([Rec(*t) for t in plain], 500, sample_predictor(None, None))
    assert [s.label_records() for s in with_headers] == [s.label_records() for s in without]
    assert all(not s.quota_fired and not s.quota_refused for s in with_headers)


def test_quota_log_lines_are_bounded_per_round() -> None:
    p = sample_predictor({"share": 0.001, "eps": 0.2}, None)  # c0_q = 5: many clients fire
    n = QUOTA_LOG_LINES + 30
    xs = [BOUNDARY] * (40 * n)
    who: list[bytes | None] = [f"c{i % n}".encode() for i in range(40 * n)]
    _, steps = run(recs(xs, who), 1_000, p)
    kinds = [e.kind for s in steps for e in s.events]
    fired = sum(s.quota_fired.get("s", 0) for s in steps)
    assert fired > QUOTA_LOG_LINES
    assert kinds.count("quota") == QUOTA_LOG_LINES and kinds.count("quota_many") == 1


def test_the_burn_tally_sums_a_rounds_releases_and_survives_the_checkpoint_meta() -> None:
    t = BurnTally()
    t.add(np.array([[1, 0, 7], [1, 1, -2]], dtype=np.int64))
    t.add(np.zeros((0, 3), dtype=np.int64))
    assert (t.round, t.windows, t.noisy_tops) == (1, 2, 5) and t.of_round(1) == (2, 5) and t.of_round(2) == (0, 0)
    t.add(np.array([[2, 0, 4]], dtype=np.int64))  # a new round starts over
    assert t.to_meta() == [2, 1, 4] and BurnTally.from_meta(t.to_meta()) == t
    assert BurnTally.from_meta(None) == BurnTally() and BurnTally.from_meta("junk") == BurnTally()


# -- a checkpoint keeps its schedule --------------------------------------------------------------------


def test_a_restored_model_reports_the_certificate_of_the_schedule_it_runs(tmp_path: Path) -> None:
    import asyncio

    from everlast.daemon.checkpoint.blobs import DirStore

    store = DirStore(tmp_path / "ck")
    old = ModelRuntime.prepare(load(write(tmp_path / "a")).models[0])  # created without quotas
    served, ck, restored = asyncio.run(old.activate(store, 0, 4))
    assert not restored
    asyncio.run(ck.write(served.engine, {0: 0}, {"n_train": old.n_train}))
    new = ModelRuntime.prepare(load(write(tmp_path / "b", "quotas = { share = 0.2, eps = 0.2 }")).models[0])
    assert new.schedule is not None and new.schedule.quotas is not None
    planned_eps = new.guarantee.epsilon_queries
    _, _, restored = asyncio.run(new.activate(store, 0, 4))
    assert restored and new.adopted == "quotas"
    assert new.schedule.quotas is None and new.guarantee.epsilon_queries == old.guarantee.epsilon_queries < planned_eps


# -- logs and metrics -------------------------------------------------------------------------------------


def test_quota_lines_pass_the_rate_limit_and_other_warnings_do_not() -> None:
    f = RateLimit(every_s=10, clock=lambda: 0.0)

    def rec(extra: dict[str, Any]) -> logging.LogRecord:
        r = logging.LogRecord("everlast.daemon", logging.WARNING, "x", 1, "model %s: client %s", ("s", "c"), None)
        r.__dict__.update(extra)
        return r

    assert all(f.filter(rec({UNLIMITED: True})) for _ in range(5))
    assert [f.filter(rec({})) for _ in range(3)] == [True, False, False]


def test_quota_and_burn_series_are_bounded_and_timings_can_be_left_out() -> None:
    m = Metrics()
    m.declare(["s", "l"], without_rounds={"l"}, with_burn={"s"})
    text = generate_latest(m.registry).decode()
    assert 'everlast_client_quota_refusals_total{model="s"} 0.0' in text
    assert 'everlast_client_quota_fired_total{model="s"} 0.0' in text
    assert 'everlast_round_burn_noisy_tops{model="s"} 0.0' in text and 'burn_noisy_tops{model="l"}' not in text
    assert "everlast_batch_seconds" in text and "process_cpu_seconds_total" in text
    quiet = Metrics(expose_timings=False)
    quiet.declare(["s"])
    quiet.batch_seconds.observe(0.1)  # observed and dropped
    quiet.lag.labels(partition="0").set(7)  # the lag measures how long a transition pauses its partition
    text = generate_latest(quiet.registry).decode()
    for name in ("everlast_batch_seconds", "everlast_round_transition_seconds", "everlast_checkpoint_seconds",
                 "process_cpu_seconds_total", "everlast_consumer_lag_records"):
        assert name not in text, name
    # no metric of the daemon has a label a client chooses
    from tests.deploy.helpers import exposition_labels

    assert all(not ({"client", "client_id"} & labels) for labels in exposition_labels().values())


def test_the_start_up_line_prints_the_certificate_with_its_quotas_and_burn_rate_signal(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from everlast.daemon.app import prepare_models

    with caplog.at_level(logging.INFO, logger="everlast.daemon"):
        prepare_models(load(write(tmp_path / "on", "quotas = { share = 0.2, eps = 0.2 }\n"
                                                   "burn = { window = 1000, eps = 0.1 }")))
        prepare_models(load(write(tmp_path / "off")))
    lines = [r.getMessage() for r in caplog.records]
    on = next(ln for ln in lines if "per-client quotas on" in ln)
    assert "query epsilon 3.998" in on and "share 0.2 of the halting threshold, eps_q 0.2" in on
    assert "a noisy top count per 1,000 queries, eps_b 0.1" in on and "Theorem Q+" in on
    assert any("per-client quotas off, burn-rate signal off" in ln for ln in lines)
    assert any("runs no burn-rate signal: the halt-budget alerts have no data" in ln for ln in lines)


def test_the_quota_line_in_operations_is_the_one_the_daemon_logs(caplog: pytest.LogCaptureFixture) -> None:
    """docs/OPERATIONS.md's example line, up to its "...", is what the daemon logs for a firing the
    processor reports (client and offset: `PartitionProcessor` puts both in the event)."""
    import re

    from everlast.daemon.events import Event, EventKind, log_events

    text = (Path(__file__).resolve().parents[2] / "docs" / "OPERATIONS.md").read_text()
    shown = re.search(r"^(model fraud: client .*?); \.\.\.$", text, re.M)
    assert shown, "docs/OPERATIONS.md shows an example quota line"
    event = Event(EventKind.QUOTA, "fraud", 3, f"{show_client(b'acme-prod-17')} (offset 48213)")
    with caplog.at_level(logging.WARNING, logger="everlast.daemon"):
        log_events(0, [event])
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith(shown.group(1) + "; ")
