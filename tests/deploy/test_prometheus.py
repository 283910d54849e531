"""Prometheus configuration and alert rules, checked with Debian's promtool, and Debian's Prometheus
scraping a running daemon (the compose stack's configuration and sample model, on the test broker)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import msgpack
import pytest
import yaml

from everlast.daemon.broker import EmbeddedBroker, free_port
from tests.daemon.kafka_helpers import collect, create_topics, produce, running, unique
from tests.deploy.helpers import (
    ALERTS,
    COMPOSE_DIR,
    COMPOSE_TOML,
    PROM_CONFIG,
    PROM_DIR,
    PROMETHEUS_HOW,
    alert_exprs,
    dashboard_exprs,
    grafana_to_promql,
    metric_refs,
    module,
    require_tool,
)


def promtool(*args: str, cwd: Path = PROM_DIR) -> subprocess.CompletedProcess[str]:
    exe = require_tool("promtool", PROMETHEUS_HOW)
    return subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_alert_rules_are_valid() -> None:
    r = promtool("check", "rules", str(ALERTS))
    assert r.returncode == 0, r.stdout + r.stderr


def test_prometheus_config_is_valid_and_loads_the_rules() -> None:
    r = promtool("check", "config", str(PROM_CONFIG))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 rule files found" in r.stdout


def test_alert_rules_unit_tests_pass() -> None:
    r = promtool("test", "rules", "alerts_test.yml")
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_alert_has_a_unit_test_or_a_reason() -> None:
    tests = yaml.safe_load((PROM_DIR / "alerts_test.yml").read_text())
    tested = {c["alertname"] for t in tests["tests"] for c in t.get("alert_rule_test", [])}
    untested = set(alert_exprs()) - tested
    # absent() and a 6-hour histogram window are plain enough to leave to `promtool check rules`
    assert untested <= {"EverlastDaemonAbsent", "EverlastTransitionSlow"}, untested


def test_dashboard_queries_are_valid_promql(tmp_path: Path) -> None:
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"everlast:panel_{i}", "expr": grafana_to_promql(e)}
                    for i, e in enumerate(dashboard_exprs().values())
                ],
            }
        ]
    }
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump(rules))
    r = promtool("check", "rules", str(path))
    assert r.returncode == 0, r.stdout + r.stderr


# -- Debian's Prometheus against a running daemon ------------------------------------------------


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())  # type: ignore[no-any-return]


async def _api(base: str, path: str, **params: str) -> dict[str, Any]:
    q = ("?" + urllib.parse.urlencode(params)) if params else ""
    return await asyncio.to_thread(_get, f"{base}{path}{q}")


async def _until(what: str, fn: Any, timeout: float = 45.0) -> Any:
    """Poll the async ``fn`` until it returns something truthy (bounded)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = await fn()
        except OSError as exc:  # Prometheus not listening yet
            last = exc
        if last and not isinstance(last, BaseException):
            return last
        await asyncio.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


@pytest.mark.broker
@pytest.mark.asyncio
async def test_prometheus_scrapes_the_daemon_and_evaluates_the_alerts(
    broker: EmbeddedBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prometheus = require_tool("prometheus", PROMETHEUS_HOW)
    topics = {k: unique(k) for k in ("queries", "labels", "dead_letters")}
    env = {
        # the compose stack's everlast.toml and sample model, pointed at the test broker
        "EVERLAST_BROKER__BOOTSTRAP_SERVERS": broker.bootstrap,
        "EVERLAST_TOPICS__QUERIES": topics["queries"],
        "EVERLAST_TOPICS__LABELS": topics["labels"],
        "EVERLAST_TOPICS__DEAD_LETTERS": topics["dead_letters"],
        "EVERLAST_CONSUMER__GROUP_ID": unique("g"),
        "EVERLAST_CONSUMER__SESSION_TIMEOUT_MS": "2000",
        "EVERLAST_CONSUMER__HEARTBEAT_INTERVAL_MS": "200",
        "EVERLAST_CHECKPOINT__DIR": str(tmp_path / "ck"),
        "EVERLAST_METRICS__HOST": "127.0.0.1",
        "EVERLAST_METRICS__PORT": "0",
        # so that every metric the dashboard and the alerts use is exported
        "EVERLAST_METRICS__EXPOSE_HALTS_USED": "true",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("EVERLAST_CHECKPOINT_KEY", raising=False)
    await create_topics(broker.bootstrap, list(topics.values()))
    sample = module(COMPOSE_DIR / "make_sample.py", "everlast_make_sample")
    round_r = int(json.loads((COMPOSE_DIR / "sample" / "schedule.json").read_text())["rounds"][0]["R"])
    n = round_r + 500  # one round transition, so its histogram and counter are exported too

    async with running(COMPOSE_TOML) as status:
        port = int(status["metrics_port"])  # type: ignore[call-overload]
        assert await sample.produce(broker.bootstrap, topics["queries"], queries=n, rate=1e9) == n
        await produce(broker.bootstrap, topics["queries"], [(b"sample", b"\xc1", [])])  # a dead letter
        await produce(broker.bootstrap, topics["queries"], [(b"sample", msgpack.packb({"id": "i", "x": "a"}), [])])
        assert len(await collect(broker.bootstrap, topics["labels"], until=n + 1)) >= n + 1

        web = free_port()
        base = f"http://127.0.0.1:{web}"
        cfg = tmp_path / "prometheus.yml"
        cfg.write_text(
            yaml.safe_dump(
                {
                    "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "rule_files": [str(ALERTS)],
                    "scrape_configs": [
                        {"job_name": "everlast", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
                    ],
                }
            )
        )
        log = (tmp_path / "prometheus.log").open("wb")
        proc = subprocess.Popen(
            [
                prometheus,
                f"--config.file={cfg}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{web}",
            ],
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:

            async def queries_sample() -> list[Any]:
                r = await _api(base, "/api/v1/query", query="everlast_queries_total")
                return r["data"]["result"]  # type: ignore[no-any-return]

            result = await _until("everlast_queries_total in Prometheus", queries_sample)
            got = {(s["metric"]["model"], s["metric"]["status"]): float(s["value"][1]) for s in result}
            assert got[("sample", "ok")] == n
            assert got[("sample", "invalid")] == 1
            assert result[0]["metric"]["job"] == "everlast"

            # every metric the dashboard and the alerts use is one Prometheus now holds
            names = set((await _api(base, "/api/v1/label/__name__/values"))["data"])
            used = {m for e in [*dashboard_exprs().values(), *alert_exprs().values()] for m, _ in metric_refs(e)}
            assert used - names == set(), f"used but not scraped: {sorted(used - names)}"

            async def evaluated() -> list[Any] | None:
                groups = (await _api(base, "/api/v1/rules"))["data"]["groups"]
                rules = [r for g in groups for r in g["rules"]]
                done = rules and all(r.get("lastEvaluation", "").startswith("2") and r["health"] != "unknown"
                                     for r in rules)
                return rules if done else None

            rules = await _until("every alert rule evaluated", evaluated)
            assert {r["name"] for r in rules} == set(alert_exprs())
            assert [r for r in rules if r["health"] != "ok"] == []

            async def guarantee_sample() -> list[Any]:
                r = await _api(base, "/api/v1/query", query='everlast_guarantee_epsilon{model="sample"}')
                return r["data"]["result"]  # type: ignore[no-any-return]

            # the sample schedule certifies ~2.1 (training) and ~4.0 (queries): moderate, so the ticket for a
            # weak guarantee (epsilon > 10; tests/deploy/test_alerts_fire.py makes it fire) stays quiet
            eps = await _until("the sample's guarantee in Prometheus", guarantee_sample)
            assert {s["metric"]["protects"] for s in eps} >= {"training", "queries"}
            assert all(1.5 < float(s["value"][1]) < 5 for s in eps)
            firing = {a["labels"]["alertname"] for a in (await _api(base, "/api/v1/alerts"))["data"]["alerts"]}
            assert not firing & {"EverlastGuaranteeWeak", "EverlastModelHalted", "EverlastDaemonDown",
                                 "EverlastBrokerDown", "EverlastLogReset"}
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()
    assert status["exit_code"] == 0
