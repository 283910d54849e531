"""Every alert rule can fire: each test produces a rule's real condition against a real daemon on
the real broker, with Debian's Prometheus scraping it, and waits for the rule's expression (from
deploy/prometheus/alerts.yml, verbatim) to return a series. The ``for:`` durations are not waited
out (promtool's unit tests cover them); one threshold is scaled, and says so: EverlastTransitionSlow
(a transition of over 5 minutes) is checked with the daemon's real transition histogram against
0 seconds.

Waits are bounded polls with generous limits, never timings; a scenario that stalls prints every
task's stack."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
import yaml
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner

from everlast.daemon.broker import EmbeddedBroker, free_port
from tests.daemon.kafka_helpers import collect_ids, create_topics, produce, query_records, running, write_config
from tests.daemon.test_rebalance import one_model_per_partition
from tests.deploy.helpers import ALERTS, PROMETHEUS_HOW, alert_exprs, require_tool

EXPRS = alert_exprs()
SCALED = {"EverlastTransitionSlow": ("> 300", "> 0")}
"""Thresholds a test cannot reach in reasonable time, replaced (old, new) in the expression."""


def expr_of(alert: str) -> str:
    e = EXPRS[alert]
    if alert in SCALED:
        old, new = SCALED[alert]
        assert old in e, f"{alert}: the scaled threshold {old!r} is no longer in the rule"
        e = e.replace(old, new)
    return e


class Prometheus:
    """Debian's Prometheus scraping the targets listed in a file (1 s interval), with the rules."""

    def __init__(self, root: Path) -> None:
        self.exe = require_tool("prometheus", PROMETHEUS_HOW)
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.targets = root / "targets.json"
        self.targets.write_text("[]")
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        cfg = root / "prometheus.yml"
        cfg.write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(ALERTS)],
            "scrape_configs": [{"job_name": "everlast", "file_sd_configs": [
                {"files": [str(self.targets)], "refresh_interval": "1s"}]}],
        }))
        self.log = (root / "prometheus.log").open("wb")
        self.proc = subprocess.Popen(
            [self.exe, f"--config.file={cfg}", f"--storage.tsdb.path={root / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            cwd=root, stdout=self.log, stderr=subprocess.STDOUT,
        )

    def scrape(self, *ports: int) -> None:
        self.targets.write_text(json.dumps([{"targets": [f"127.0.0.1:{p}" for p in ports]}] if ports else []))

    def _query(self, expr: str) -> list[Any]:
        q = urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(f"{self.base}/api/v1/query?{q}", timeout=5) as r:
            return json.loads(r.read())["data"]["result"]  # type: ignore[no-any-return]

    async def becomes_true(self, alert: str, timeout: float = 90.0, while_waiting: Callable[[], Awaitable[None]]
                           | None = None) -> list[Any]:
        """Poll the alert's expression until it returns a series (bounded)."""
        return await self.holds(expr_of(alert), timeout, while_waiting, alert)

    async def holds(self, expr: str, timeout: float = 90.0, while_waiting: Callable[[], Awaitable[None]]
                    | None = None, alert: str = "") -> list[Any]:
        """Poll a PromQL expression until it returns a series (bounded)."""
        alert = alert or expr
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            if while_waiting is not None:
                await while_waiting()
            try:
                last = await asyncio.to_thread(self._query, expr)
            except OSError as exc:  # not listening yet
                last = exc
            if isinstance(last, list) and last:
                return last
            await asyncio.sleep(0.5)
        raise AssertionError(f"{alert}: `{expr}` did not become true in {timeout:.0f}s; last: {last!r}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@asynccontextmanager
async def prometheus(root: Path) -> AsyncIterator[Prometheus]:
    p = Prometheus(root)
    try:
        yield p
    finally:
        p.stop()


async def watchdog(aw: Awaitable[None], seconds: float) -> None:
    try:
        await asyncio.wait_for(aw, seconds)
    except TimeoutError:
        for t in asyncio.all_tasks():
            t.print_stack(limit=8)
        raise


def home(model: str, partitions: int = 4) -> int:
    parts = list(range(partitions))
    return int(DefaultPartitioner()(model.encode(), parts, parts))


@pytest.mark.broker
@pytest.mark.asyncio
async def test_privacy_and_data_alerts_fire(broker: EmbeddedBroker, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """GuaranteeWeak, the four halt and refusal alerts, the three dead-letter alerts, a transition,
    and a failing checkpoint store that stalls the daemon while queries keep coming (CheckpointFailures,
    ConsumerLagGrowing)."""
    monkeypatch.setenv("EVERLAST_METRICS__EXPOSE_HALTS_USED", "true")
    m, m2 = one_model_per_partition()[:2]
    cfg, topics = write_config(tmp_path, broker.bootstrap, [m, m2])
    await create_topics(broker.bootstrap, [topics["queries"], topics["labels"], topics["dead_letters"]])
    q = topics["queries"]

    async def scenario() -> None:
        async with running(cfg) as st, prometheus(tmp_path / "prom") as prom:
            prom.scrape(int(st["metrics_port"]))  # type: ignore[call-overload]
            fired = await prom.becomes_true("EverlastGuaranteeWeak")
            assert {s["metric"]["model"] for s in fired} == {m, m2}

            # malformed records (10% of the traffic), and one on a partition its model does not live on
            bad = [(m.encode(), b"\xc1", [])] * 200
            await produce(broker.bootstrap, q, query_records(m2, np.linspace(0.1, 0.9, 1_800)) + bad)
            p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
            await p.start()
            try:
                await p.send_and_wait(q, msgpack.packb({"id": "wp", "x": 0.5}), key=m.encode(),
                                      partition=(home(m) + 1) % 4)
            finally:
                await p.stop()
            for alert in ("EverlastDeadLetters", "EverlastDeadLetterRateHigh", "EverlastWrongPartitioner"):
                await prom.becomes_true(alert)

            # queries on the decision boundary spend the round's halt budget; the round pauses and refuses
            await produce(broker.bootstrap, q, query_records(m, np.full(2_500, 0.5), start_id=100_000))
            await collect_ids(broker.bootstrap, topics["labels"], set(range(100_000, 102_500)))
            for alert in ("EverlastHaltBudgetHot", "EverlastHaltBudgetCritical", "EverlastRoundPaused",
                          "EverlastRefusingQueries"):
                fired = await prom.becomes_true(alert)
                assert {s["metric"]["model"] for s in fired} == {m}, alert

            # m2 completes its round (R = 20,000): a real transition feeds the histogram
            await produce(broker.bootstrap, q, query_records(m2, np.random.default_rng(1).random(18_500),
                                                             start_id=200_000))
            await prom.becomes_true("EverlastTransitionSlow")

            # the checkpoint store fails (m2's directory is gone, a file in its place) while queries
            # keep coming: checkpoints are retried, the daemon stops consuming, the lag grows
            ck = tmp_path / "ck" / m2
            shutil.move(ck, tmp_path / "ck-moved")
            ck.write_bytes(b"")
            sent = [300_000]

            async def keep_producing() -> None:
                await produce(broker.bootstrap, q, query_records(m2, np.full(300, 0.3), start_id=sent[0]))
                sent[0] += 300

            await prom.becomes_true("EverlastCheckpointFailures", while_waiting=keep_producing)
            await prom.becomes_true("EverlastConsumerLagGrowing", while_waiting=keep_producing)
            ck.unlink()
            shutil.move(tmp_path / "ck-moved", ck)
        assert st["exit_code"] == 0

    await watchdog(scenario(), 400)


@pytest.mark.broker
@pytest.mark.asyncio
async def test_the_prober_fires_the_halt_budget_alerts_with_no_opt_in_flag(broker: EmbeddedBroker,
                                                                           tmp_path: Path) -> None:
    """The issue's prober scenario on the compose sample's model as the compose stack configures it
    (the burn-rate signal on; metrics.expose_halts_used off, so no exact top count is exported): the
    README's prober (client A) and an i.i.d. client (B). On ``sample`` (its per-client quotas on) A's
    quota fires (EverlastClientQuotaFired), and its refusals page nobody. On ``open`` (the same model
    without quotas) the prober spends the round's budget: EverlastHaltBudgetHot and Critical fire on the
    noisy signal, then the round pauses for both clients."""
    from everlast.adversary_sim.availability import Client
    from everlast.adversary_sim.availability_kafka import run_clients_kafka, sample_model, write_config
    from everlast.adversary_sim.iid import make_task
    from everlast.adversary_sim.prober import BoundaryProber
    from everlast.adversary_sim.streams import IIDStream
    from everlast.engine.concepts import from_spec

    cfg = write_config(tmp_path, [sample_model(True), sample_model(False, "open")], broker.bootstrap, seed=0)
    text = cfg.read_text()
    assert "expose_halts_used" not in text and "quotas" in text and "burn" in text
    task = make_task(from_spec({"name": "thresholds"}), "uniform", seed=0)

    def clients() -> list[Client]:
        return [Client("A", BoundaryProber(task, 0), 100, 10_000), Client("B", IIDStream(task, 1), 50, 5_000)]

    async def scenario() -> None:
        from everlast.daemon.config import load

        c = load(cfg)
        async with running(cfg) as st, prometheus(tmp_path / "prom") as prom:
            port = int(st["metrics_port"])  # type: ignore[call-overload]
            prom.scrape(port)
            exposed = await asyncio.to_thread(
                lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode())
            assert "everlast_round_halts_used{" not in exposed  # no opt-in flag
            assert 'everlast_round_burn_noisy_tops{model="open"}' in exposed
            await prom.holds('everlast_guarantee_epsilon{model="open"}')  # scraped from the start: increase() sees 0->1
            q, lab = c.topics.queries, c.topics.labels
            with_quotas = await run_clients_kafka(broker.bootstrap, q, lab, "sample", clients())
            assert with_quotas["clients"]["B"]["ok"] == 5_000
            assert set(with_quotas["clients"]["A"]["reasons"]) == {"client-quota"}
            fired = await prom.becomes_true("EverlastClientQuotaFired")
            assert {s["metric"]["model"] for s in fired} == {"sample"}

            without = await run_clients_kafka(broker.bootstrap, q, lab, "open", clients())
            assert without["clients"]["B"]["reasons"].get("round-paused", 0) > 0
            for alert in ("EverlastHaltBudgetHot", "EverlastHaltBudgetCritical", "EverlastRoundPaused"):
                fired = await prom.becomes_true(alert)
                assert {s["metric"]["model"] for s in fired} == {"open"}, alert
            fired = await prom.becomes_true("EverlastRefusingQueries")
            assert {s["metric"]["model"] for s in fired} == {"open"}  # the quota refusals page nobody
        assert st["exit_code"] == 0

    await watchdog(scenario(), 400)


@pytest.mark.broker
@pytest.mark.asyncio
async def test_availability_alerts_fire(tmp_path: Path) -> None:
    """BrokerDown, LogReset (the broker comes back empty), ModelsUnserved (another member of the
    consumer group holds partitions), DaemonDown, DaemonAbsent."""
    b = EmbeddedBroker().start()
    models = one_model_per_partition()
    cfg, topics = write_config(tmp_path, b.bootstrap, models)
    names = [topics["queries"], topics["labels"], topics["dead_letters"]]
    group = next(ln.split('"')[1] for ln in cfg.read_text().splitlines() if ln.startswith("group_id"))

    async def scenario() -> None:
        await create_topics(b.bootstrap, names)
        async with prometheus(tmp_path / "prom") as prom:
            async with running(cfg) as st:
                prom.scrape(int(st["metrics_port"]))  # type: ignore[call-overload]
                await produce(b.bootstrap, topics["queries"], query_records(models[0], np.linspace(0, 1, 500)))
                await collect_ids(b.bootstrap, topics["labels"], set(range(500)))

                b.stop()
                await prom.becomes_true("EverlastBrokerDown")
                b.start()  # the same address, an empty log
                await create_topics(b.bootstrap, names)
                await produce(b.bootstrap, topics["queries"],
                              query_records(models[0], np.linspace(0, 1, 10), start_id=1_000))
                await prom.becomes_true("EverlastLogReset")
                await collect_ids(b.bootstrap, topics["labels"], set(range(1_000, 1_010)))

                other = AIOKafkaConsumer(topics["queries"], bootstrap_servers=b.bootstrap, group_id=group,
                                         enable_auto_commit=False, session_timeout_ms=2000,
                                         heartbeat_interval_ms=200)
                await other.start()
                try:
                    async def poll_other() -> None:
                        await other.getmany(timeout_ms=100)

                    await prom.becomes_true("EverlastModelsUnserved", while_waiting=poll_other)
                finally:
                    await other.stop()
            await prom.becomes_true("EverlastDaemonDown")
            prom.scrape()
            await prom.becomes_true("EverlastDaemonAbsent")

    try:
        await watchdog(scenario(), 400)
    finally:
        b.stop()


@pytest.mark.broker
@pytest.mark.asyncio
async def test_a_suspended_model_pages(tmp_path: Path) -> None:
    """ModelSuspended: a daemon killed with answers past its checkpoint, its journal lost too, and the
    broker's log gone: the model cannot be replayed exactly and is suspended (LogReset fires beside it)."""
    from everlast.daemon.journal import FILENAME
    from tests.daemon.test_crash import start_daemon

    b = EmbeddedBroker().start()
    port = free_port()
    # No checkpoint after the creation's (offset 0): all 3,000 answers are past it, whatever the
    # timing (with a time-based checkpoint the last one could cover them, and then nothing is lost).
    cfg, topics = write_config(tmp_path, b.bootstrap, ["m"], every_queries=1_000_000)
    cfg.write_text(cfg.read_text().replace("port = 0", f"port = {port}")
                   .replace("every_seconds = 1.0", "every_seconds = 1000000.0"))
    names = [topics["queries"], topics["labels"], topics["dead_letters"]]
    log = tmp_path / "daemon.log"

    async def scenario() -> None:
        await create_topics(b.bootstrap, names)
        await produce(b.bootstrap, topics["queries"], query_records("m", np.linspace(0, 1, 3_000)))
        proc = start_daemon(cfg, log)
        try:
            await collect_ids(b.bootstrap, topics["labels"], set(range(3_000)))
        finally:
            proc.kill()
            proc.wait()
        for f in (tmp_path / "ck").glob(FILENAME + "*"):
            f.unlink()
        b.stop()
        b.start()
        await create_topics(b.bootstrap, names)
        await produce(b.bootstrap, topics["queries"], query_records("m", np.linspace(0, 1, 10), start_id=3_000))
        proc = start_daemon(cfg, log)
        try:
            async with prometheus(tmp_path / "prom") as prom:
                prom.scrape(port)
                fired = await prom.becomes_true("EverlastModelSuspended")
                assert {s["metric"]["model"] for s in fired} == {"m"}
        finally:
            proc.terminate()
            proc.wait(60)

    try:
        await watchdog(scenario(), 300)
    finally:
        b.stop()


LEGACY_ONLY = {"EverlastModelHalted": "a round now pauses instead of halting: only a checkpoint written before "
                                      "paused rounds restores a halted model; promtool's rule test "
                                      "(deploy/prometheus/alerts_test.yml) covers the expression"}
"""Alerts no live daemon can reach any more, with the reason (their rule tests still run)."""


def test_every_alert_rule_has_a_firing_test() -> None:
    here = Path(__file__).read_text()
    missing = [a for a in EXPRS if f'"{a}"' not in here and a not in LEGACY_ONLY]
    assert missing == [], f"alert rules without a firing test: {missing}"
