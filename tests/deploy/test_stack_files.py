"""The Compose stack, the Kubernetes manifests and the Grafana provisioning, parsed and checked
against the daemon: every metric a panel or an alert uses exists in its exposition, every EVERLAST_*
variable is a setting, every referenced file exists, configurations load and their models plan."""

from __future__ import annotations

import asyncio
import json
import re
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from everlast.daemon.config import MetricsConfig
from tests.deploy.helpers import (
    ALERTS,
    COMPOSE_DIR,
    COMPOSE_TOML,
    DASHBOARD,
    DOCKERFILE,
    GRAFANA_DIR,
    K8S_DIR,
    OPERATIONS,
    PROM_DIR,
    PROMETHEUS_SERIES,
    ROOT,
    alert_exprs,
    check_env_settings,
    compose,
    dashboard,
    dashboard_exprs,
    dockerfile_stages,
    env_of,
    exposition_labels,
    host_path,
    key_env_name,
    load_with_env,
    metric_refs,
    module,
    mounts,
    same_setting,
    setting_path,
    setting_value,
)

# -- metrics -------------------------------------------------------------------------------------

ADDED_BY_PROMETHEUS = {"job", "instance"}


def _check_refs(exprs: dict[str, str]) -> list[str]:
    known = {**exposition_labels(), **PROMETHEUS_SERIES}
    problems = []
    for where, expr in exprs.items():
        for name, labels in metric_refs(expr):
            if name not in known:
                problems.append(f"{where}: {name} is not in the daemon's exposition")
            elif labels - known[name] - ADDED_BY_PROMETHEUS:
                problems.append(f"{where}: {name} has no label(s) {sorted(labels - known[name])}")
    return problems


def test_every_metric_an_alert_uses_is_exported() -> None:
    exprs = alert_exprs()
    assert len(exprs) >= 10
    assert _check_refs(exprs) == []


def test_every_metric_a_dashboard_panel_uses_is_exported() -> None:
    assert _check_refs(dashboard_exprs()) == []


def test_the_alerts_cover_what_a_privacy_engineer_is_paged_for() -> None:
    exprs = alert_exprs()
    used = {m for e in exprs.values() for m, _ in metric_refs(e)}
    for metric in (
        "everlast_model_halted",
        "everlast_round_halts_used",
        "everlast_round_halts_allowed",
        "everlast_queries_total",
        "everlast_dead_letters_total",
        "everlast_consumer_lag_records",
        "everlast_checkpoint_failures_total",
        "everlast_broker_up",
        "everlast_log_resets_total",
        "up",
    ):
        assert metric in used, metric
    assert 'status="refused"' in exprs["EverlastRefusingQueries"]
    rules = [r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]
    for r in rules:
        assert r["labels"]["severity"] in ("page", "ticket"), r["alert"]
        assert r["annotations"]["summary"] and r["annotations"]["runbook_url"], r["alert"]


def _slug(heading: str) -> str:
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def test_every_runbook_link_points_at_a_section_of_the_runbook() -> None:
    anchors = {_slug(m) for m in re.findall(r"^#+\s+(.*)$", OPERATIONS.read_text(), re.M)}
    rules = [r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]
    for r in rules:
        doc, _, anchor = r["annotations"]["runbook_url"].partition("#")
        assert (ROOT / doc).is_file(), r["alert"]
        assert anchor in anchors, f"{r['alert']}: no section #{anchor} in {doc}"
    for anchor in re.findall(r"\]\(#([\w-]+)\)", OPERATIONS.read_text()):
        assert anchor in anchors, anchor


# -- Grafana -------------------------------------------------------------------------------------


def test_dashboard_has_the_panels_operators_need() -> None:
    d = dashboard()
    assert d["uid"] == "everlast"
    text = json.dumps(d)
    for metric in (
        "everlast_round",
        "everlast_rounds_completed_total",
        "everlast_queries_total",
        "everlast_round_halts_allowed",
        "everlast_round_halts_used",
        "everlast_model_halted",
        'status=\\"refused\\"',
        "everlast_batch_seconds_bucket",
        "everlast_consumer_lag_records",
        "everlast_round_transition_seconds",
        "everlast_guarantee_epsilon",
    ):
        assert metric in text, metric
    halts = [p for p in d["panels"] if "everlast_round_halts_used" in json.dumps(p.get("targets"))]
    assert halts and all("expose_halts_used" in p["description"] for p in halts)


def test_dashboard_layout_and_datasource() -> None:
    d = dashboard()
    ds = yaml.safe_load((GRAFANA_DIR / "provisioning" / "datasources" / "prometheus.yml").read_text())
    (source,) = ds["datasources"]
    assert source["type"] == "prometheus"
    ids, cells = set(), set()
    for p in d["panels"]:
        assert p["id"] not in ids
        ids.add(p["id"])
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"panel {p['title']!r} overlaps another"
                cells.add((x, y))
        if p["type"] == "text":
            continue
        assert p["targets"], p["title"]
        for t in [p, *p["targets"]]:
            assert t["datasource"] == {"type": "prometheus", "uid": source["uid"]}, p["title"]
    for v in d["templating"]["list"]:
        assert v["datasource"]["uid"] == source["uid"]


def test_grafana_provisioning_points_at_the_compose_mounts() -> None:
    c = compose()
    graf = c["services"]["grafana"]
    prov = yaml.safe_load((GRAFANA_DIR / "provisioning" / "dashboards" / "everlast.yml").read_text())
    (provider,) = prov["providers"]
    folder = host_path(graf, provider["options"]["path"])
    assert folder is not None and (folder / DASHBOARD.name).samefile(DASHBOARD)
    assert host_path(graf, "/etc/grafana/provisioning/datasources/prometheus.yml") is not None
    home = host_path(graf, env_of(graf)["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"])
    assert home is not None and home.samefile(DASHBOARD)
    ds = yaml.safe_load((GRAFANA_DIR / "provisioning" / "datasources" / "prometheus.yml").read_text())
    url = ds["datasources"][0]["url"]
    assert re.fullmatch(r"http://prometheus:9090", url) and "prometheus" in c["services"]


# -- Compose -------------------------------------------------------------------------------------


def test_compose_services_reference_what_exists() -> None:
    c = compose()
    services = c["services"]
    assert {"kafka", "topics", "everlast", "prometheus", "grafana"} <= set(services)
    declared = set(c.get("volumes") or {})
    for name, s in services.items():
        for m in mounts(s):
            if m.bind:
                assert (COMPOSE_DIR / m.source).exists(), f"{name}: {m.source} does not exist"
            else:
                assert m.source in declared, f"{name}: volume {m.source} is not declared"
        deps = s.get("depends_on", {})
        for dep, spec in (deps.items() if isinstance(deps, dict) else ((d, {}) for d in deps)):
            assert dep in services, f"{name} depends on unknown {dep}"
            cond = spec.get("condition", "service_started")
            assert cond in ("service_started", "service_healthy", "service_completed_successfully")
            if cond == "service_healthy":
                has_check = "healthcheck" in services[dep] or (
                    "build" in services[dep] and "HEALTHCHECK" in DOCKERFILE.read_text()
                )
                assert has_check, f"{dep} has no health check"
        if "build" in s:
            ctx = (COMPOSE_DIR / s["build"]["context"]).resolve()
            assert (ctx / s["build"]["dockerfile"]).samefile(DOCKERFILE)
        for p in s.get("ports", []):
            assert str(p).startswith("127.0.0.1:"), f"{name} publishes {p} beyond loopback"
        image = s.get("image", "")
        assert image and not image.endswith(":latest") and ":" in image, f"{name}: pin the image tag"
    assert services["kafka"]["image"].startswith("apache/kafka:")
    kenv = env_of(services["kafka"])
    assert "controller" in kenv["KAFKA_PROCESS_ROLES"] and "broker" in kenv["KAFKA_PROCESS_ROLES"]
    assert "CLUSTER_ID" in kenv and "KAFKA_CONTROLLER_QUORUM_VOTERS" in kenv


def _daemon_config_path(service: dict[str, Any]) -> str:
    cmd = service["command"]
    return str(cmd[cmd.index("--config") + 1])


def test_compose_daemon_config_loads_with_its_environment_and_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    from everlast.daemon.app import prepare_models

    s = compose()["services"]["everlast"]
    env = env_of(s)
    assert check_env_settings(env) == []
    cfg_host = host_path(s, _daemon_config_path(s))
    assert cfg_host is not None and cfg_host.samefile(COMPOSE_TOML)
    cfg = load_with_env(monkeypatch, COMPOSE_TOML, env)
    for name, value in env.items():
        path = setting_path(name)
        if path is not None:
            assert same_setting(setting_value(cfg, path), value), name
    assert env[key_env_name()] == ""  # no key in the file: encryption is the operator's choice
    assert cfg.broker.bootstrap_servers == "kafka:9092"
    assert cfg.metrics.host == "0.0.0.0" and cfg.checkpoint.store == "dir"
    assert not cfg.metrics.expose_halts_used  # privacy-safe default
    # the model files, seen from inside the container, are bind mounts of committed files
    raw = tomllib.loads(COMPOSE_TOML.read_text())
    cdir = PurePosixPath(_daemon_config_path(s)).parent
    for m in raw["models"]:
        for key in ("data", "schedule"):
            p = PurePosixPath(m[key])
            inside = p if p.is_absolute() else cdir / p
            host = host_path(s, str(inside))
            assert host is not None and host.is_file(), f"{key} {inside} is not mounted"
    # the checkpoint dir is the image's volume, backed by a named volume
    volume = next(i.json() or [i.args] for i in dockerfile_stages()[1][-1].all("VOLUME"))
    assert str(cfg.checkpoint.dir) in volume
    assert any(not m.bind and m.target == str(cfg.checkpoint.dir) for m in mounts(s))
    # published metrics port = the configured one
    assert any(str(p).endswith(f":{cfg.metrics.port}") for p in s["ports"])
    models = prepare_models(cfg)  # reads the training set, certifies the schedule
    g = models["sample"].guarantee
    # the sample schedule certifies only weak numbers: the docs and comments say so (~2.1 and ~4.0, the
    # quotas' eps_q = 0.2 and the burn-rate signal's eps_b = 0.1 included: Theorem Q+)
    assert g.query_private and 2 < g.epsilon_training < 2.3 and 3.8 < g.epsilon_queries < 4.2
    assert g.details["quotas"] == {"share": 0.2, "eps": 0.2} and g.details["burn"] == {"window": 250, "eps": 0.1}


def test_compose_creates_every_topic_the_daemon_uses() -> None:
    from everlast.daemon.config import load

    c = compose()
    cmd = c["services"]["topics"]["command"]
    script = cmd[0] if isinstance(cmd, list) else cmd
    created: dict[str, str] = {}
    for line in script.splitlines():
        m = re.search(r"--topic\s+(\S+)", line)
        if m and "--create" not in line and line.strip().startswith("create"):
            created[m.group(1)] = line
    cfg = load(COMPOSE_TOML)
    t = cfg.topics
    assert set(created) == {t.queries, t.labels, t.dead_letters, t.checkpoints}
    parts = {name: re.search(r"--partitions\s+(\S+)", line).group(1) for name, line in created.items()}  # type: ignore[union-attr]
    assert parts[t.queries] == parts[t.labels] == parts[t.dead_letters]
    assert int(parts[t.queries]) >= 2
    assert not t.create  # topics are made on purpose, with their configs
    assert env_of(c["services"]["kafka"])["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    _check_checkpoint_topic(created[t.checkpoints])


def _compaction_keeps_kafka_store_blobs() -> bool:
    """Simulate log compaction (newest record per key) on what KafkaStore writes for a blob larger
    than one chunk, and read it back."""
    from everlast.daemon.checkpoint.kafka_store import KafkaStore

    class Rec:
        def __init__(self, key: bytes, value: bytes | None, headers: list[tuple[str, bytes]] | None) -> None:
            self.key, self.value, self.headers = key, value, headers

    class Producer:
        def __init__(self) -> None:
            self.records: list[Rec] = []

        async def send(self, topic: str, key: bytes, value: bytes | None, headers: Any = None) -> Any:
            self.records.append(Rec(key, value, headers))
            fut = asyncio.get_running_loop().create_future()
            fut.set_result(None)
            return fut

    prod = Producer()
    store = KafkaStore(prod, None, "ck", max_chunk_bytes=1024)
    blob = bytes(range(256)) * 20  # 5 chunks
    asyncio.run(store.put("m", "round-1", blob))
    asyncio.run(store.put("m", "round-1", blob[::-1]))  # a newer blob replaces it; old chunks tombstoned
    newest: dict[bytes, Rec] = {}
    for r in prod.records:
        newest[r.key] = r  # compaction: the last record per key survives
    reader = KafkaStore(prod, None, "ck", max_chunk_bytes=1024)
    reader.raw = {r.key.decode(): r.value for r in newest.values() if r.value is not None}
    return reader._assemble().get("m/round-1") == blob[::-1]


def _check_checkpoint_topic(create_line: str) -> None:
    if "cleanup.policy=compact" in create_line:
        assert _compaction_keeps_kafka_store_blobs(), (
            "the checkpoints topic is compacted, but compaction loses the chunks of a large KafkaStore blob"
        )
    else:
        assert "cleanup.policy=delete" in create_line
    # a round blob is written once per round: no finite retention
    assert "retention.ms=-1" in create_line and "retention.bytes=-1" in create_line


def test_the_checkpoint_topic_is_compacted_and_compaction_keeps_chunked_blobs() -> None:
    """KafkaStore writes each chunk under its own key plus a manifest, so compaction (newest record
    per key) keeps every live blob whole; the deployment files compact the topic."""
    assert _compaction_keeps_kafka_store_blobs()
    k8s_readme = (K8S_DIR / "README.md").read_text()
    line = next(ln for ln in k8s_readme.splitlines() if "everlast.checkpoints" in ln and "--create" in ln)
    idx = k8s_readme.splitlines().index(line)
    create = " ".join(k8s_readme.splitlines()[idx : idx + 2])
    assert "cleanup.policy=compact" in create
    _check_checkpoint_topic(create)


def test_compose_prometheus_scrapes_the_daemon_and_loads_the_alerts() -> None:
    c = compose()
    prom = c["services"]["prometheus"]
    flags = dict(a.split("=", 1) for a in prom["command"] if "=" in a)
    cfg_path = host_path(prom, flags["--config.file"])
    assert cfg_path is not None and cfg_path.samefile(PROM_DIR / "prometheus.yml")
    cfg = yaml.safe_load(cfg_path.read_text())
    cdir = PurePosixPath(flags["--config.file"]).parent
    for rf in cfg["rule_files"]:
        inside = PurePosixPath(rf) if PurePosixPath(rf).is_absolute() else cdir / rf
        host = host_path(prom, str(inside))
        assert host is not None and host.samefile(ALERTS)
    (job,) = [j for j in cfg["scrape_configs"] if j["job_name"] == "everlast"]
    (target,) = job["static_configs"][0]["targets"]
    host, port = target.rsplit(":", 1)
    assert host in c["services"] and int(port) == MetricsConfig().port
    assert job.get("metrics_path", "/metrics") == "/metrics"


def test_compose_loadgen_runs_the_sample_producer() -> None:
    s = compose()["services"]["loadgen"]
    script = host_path(s, s["entrypoint"][-1])
    assert script is not None and script.samefile(COMPOSE_DIR / "make_sample.py")
    sample = module(COMPOSE_DIR / "make_sample.py", "everlast_make_sample")
    args = sample.build_parser().parse_args(s["command"])
    from everlast.daemon.config import load

    cfg = load(COMPOSE_TOML)
    assert args.topic == cfg.topics.queries
    assert sample.MODEL in {m.id for m in cfg.models}


def test_sample_files_are_what_make_sample_writes(tmp_path: Path) -> None:
    from everlast.engine.schedule import Schedule

    sample = module(COMPOSE_DIR / "make_sample.py", "everlast_make_sample")
    for p in sample.write_data(tmp_path):
        committed = COMPOSE_DIR / "sample" / p.name
        assert committed.read_bytes() == p.read_bytes(), f"regenerate {committed} with make_sample.py data"
    assert (COMPOSE_DIR / "sample" / "train.csv").stat().st_size <= 200_000
    sched = Schedule.from_dict(json.loads((COMPOSE_DIR / "sample" / "schedule.json").read_text()))
    assert sched.initial_size <= sample.N_TRAIN
    # the loadgen's stream spans several rounds, so the dashboard shows transitions
    loadgen = compose()["services"]["loadgen"]["command"]
    assert int(loadgen[loadgen.index("--queries") + 1]) >= 2 * sched.rounds[0].R


def test_sample_model_serves_several_rounds_without_halting() -> None:
    """The compose demo must not halt on its own sample stream (uniform queries, the hidden threshold):
    run the engine in-process on the sample files for the loadgen's query count."""
    import numpy as np

    from everlast.daemon.app import prepare_models
    from everlast.daemon.config import load
    from everlast.daemon.data import load_training
    from everlast.engine.phases import Phase
    from everlast.engine.predictor import Predictor

    cfg = load(COMPOSE_TOML)
    m = prepare_models(cfg)["sample"]
    g = m.guarantee  # proven for both, and weak, as the comments say
    assert g.query_private and 2 < g.epsilon_training < 2.3 and 3.8 < g.epsilon_queries < 4.2
    x, y = load_training(cfg.models[0].data)
    assert m.schedule is not None and m.schedule.quotas is not None  # the compose config turns them on
    p = Predictor.create(m.concept, m.schedule, x, y, seed=1)
    loadgen = compose()["services"]["loadgen"]["command"]
    sample = module(COMPOSE_DIR / "make_sample.py", "everlast_make_sample")
    args = sample.build_parser().parse_args(loadgen)
    qs = np.random.default_rng(1).random(args.queries)
    who = [dict(sample.client_header(i, args.clients))["everlast-client"] for i in range(args.queries)]
    done, wrong = 0, 0
    while done < len(qs):
        if p.phase is Phase.TRANSITION_DUE:
            p.transition()
            continue
        assert p.phase is Phase.ANSWERING, p.phase
        batch = qs[done : done + 5_000]
        a = p.answer(batch, who[done : done + len(batch)])
        assert not (a.labels[: a.consumed] < 0).any()  # no client of the loadgen spends its quota
        wrong += int((a.labels[: a.consumed] != (batch[: a.consumed] >= sample.THRESHOLD)).sum())
        done += a.consumed
    assert p.round >= 3 and p.phase is not Phase.HALTED
    assert wrong / done < 0.1


# -- Kubernetes ----------------------------------------------------------------------------------


def _k8s() -> dict[str, dict[str, Any]]:
    """kind -> the one object of that kind among the files kustomization.yaml lists."""
    kust = yaml.safe_load((K8S_DIR / "kustomization.yaml").read_text())
    out: dict[str, dict[str, Any]] = {}
    for res in kust["resources"]:
        path = K8S_DIR / res
        assert path.is_file(), res
        for doc in yaml.safe_load_all(path.read_text()):
            if doc["metadata"]["name"].startswith("everlast-gateway"):
                continue  # the gateway's objects: tests/deploy/test_gateway_files.py
            assert doc["kind"] not in out
            out[doc["kind"]] = doc
    return out


def _container(sts: dict[str, Any]) -> dict[str, Any]:
    (c,) = sts["spec"]["template"]["spec"]["containers"]
    return c  # type: ignore[no-any-return]


def _k8s_env(c: dict[str, Any]) -> dict[str, str]:
    env = {}
    for e in c["env"]:
        if "value" in e:
            env[e["name"]] = str(e["value"])
        elif "fieldRef" in e.get("valueFrom", {}):
            env[e["name"]] = "everlast-0"
        else:
            env[e["name"]] = ""
    return env


def test_k8s_objects_fit_together() -> None:
    k = _k8s()
    assert {"StatefulSet", "Service", "ConfigMap", "PodDisruptionBudget"} <= set(k)
    kust = yaml.safe_load((K8S_DIR / "kustomization.yaml").read_text())
    assert "secret.yaml" not in kust["resources"]  # applying must never overwrite the real key
    sts, svc = k["StatefulSet"], k["Service"]
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert sts["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert svc["spec"]["selector"].items() <= labels.items()
    assert k["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert sts["spec"]["serviceName"] == svc["metadata"]["name"]
    c = _container(sts)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert svc["spec"]["ports"][0]["targetPort"] in ports
    env = _k8s_env(c)
    assert int(env["EVERLAST_METRICS__PORT"]) == ports["metrics"]
    ann = sts["spec"]["template"]["metadata"]["annotations"]
    assert int(ann["prometheus.io/port"]) == ports["metrics"]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
    pod_sc = sts["spec"]["template"]["spec"]["securityContext"]
    user = dockerfile_stages()[1][-1].all("USER")[-1].args.split(":")[0]
    assert pod_sc["runAsNonRoot"] and str(pod_sc["runAsUser"]) == user
    assert c["securityContext"]["readOnlyRootFilesystem"]
    assert "volumeClaimTemplates" not in sts["spec"]  # state lives in the Kafka store (see below)


def test_k8s_config_loads_with_the_pod_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    k = _k8s()
    sts, cm = k["StatefulSet"], k["ConfigMap"]
    c = _container(sts)
    env = _k8s_env(c)
    assert check_env_settings(env) == []
    # the Secret the pod reads the key from: name and key match the template, whose placeholder the
    # daemon rejects (nobody runs under a published key)
    (key_ref,) = [e["valueFrom"]["secretKeyRef"] for e in c["env"] if e["name"] == key_env_name()]
    secret = yaml.safe_load((K8S_DIR / "secret.yaml").read_text())
    assert secret["metadata"]["name"] == key_ref["name"] and key_ref["key"] in secret["stringData"]
    from everlast.daemon.checkpoint.blobs import key_from_env
    from everlast.daemon.errors import CheckpointError

    monkeypatch.setenv("EVERLAST_TEST_KEY", secret["stringData"][key_ref["key"]])
    with pytest.raises(CheckpointError):
        key_from_env("EVERLAST_TEST_KEY")
    # the config file comes from the ConfigMap through the config volume
    vols = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    cfg_arg = c["args"][c["args"].index("--config") + 1]
    files: dict[str, str] = {}
    for vm in c["volumeMounts"]:
        v = vols[vm["name"]]
        if "configMap" in v:
            assert v["configMap"]["name"] == cm["metadata"]["name"]
            for item in v["configMap"]["items"]:
                assert item["key"] in cm["data"], item
                files[str(PurePosixPath(vm["mountPath"]) / item["path"])] = cm["data"][item["key"]]
    assert cfg_arg in files
    toml = tmp_path / "everlast.toml"
    toml.write_text(files[cfg_arg])
    cfg = load_with_env(monkeypatch, toml, {k: v for k, v in env.items() if k != key_env_name()})
    for name, value in env.items():
        path = setting_path(name)
        if path is not None:
            assert same_setting(setting_value(cfg, path), value), name
    # several replicas: the state must follow the partition
    assert sts["spec"]["replicas"] > 1 and cfg.checkpoint.store == "kafka"
    assert not cfg.topics.create and not cfg.metrics.expose_halts_used
    # every model file lies on a mounted volume; the schedule is the compose sample's
    mount_points = [PurePosixPath(vm["mountPath"]) for vm in c["volumeMounts"]]
    raw = tomllib.loads(files[cfg_arg])
    for m in raw["models"]:
        for key in ("data", "schedule"):
            p = PurePosixPath(m[key])
            assert p.is_absolute() and any(mp in p.parents for mp in mount_points), f"{key} {p} is not mounted"
        assert files[m["schedule"]] == (COMPOSE_DIR / "sample" / "schedule.json").read_text()
    # the probes' port is where the daemon listens
    assert cfg.metrics.host == "0.0.0.0"


def test_k8s_readme_commands_use_the_configured_topics() -> None:
    from everlast.daemon.config import TopicsConfig

    readme = (K8S_DIR / "README.md").read_text()
    t = TopicsConfig()
    for name in (t.queries, t.labels, t.dead_letters, t.checkpoints):
        assert f"--topic {name}" in readme, name
    secret_lines = [ln for ln in readme.splitlines()
                    if "kubectl create secret" in ln and "everlast-gateway-keys" not in ln]  # the keys: a JSON list
    assert secret_lines and all("openssl rand -hex 32" in ln for ln in secret_lines)
    secret = yaml.safe_load((K8S_DIR / "secret.yaml").read_text())
    assert all(secret["metadata"]["name"] in ln for ln in secret_lines)


def test_sample_round_is_the_default_design_filled_in_and_certifies() -> None:
    """The committed sample round is exactly what engine.planner.fill.hand_round writes for it (eps0
    at the accuracy floor, c from the thresholds' top rate, the halting test filled in), and the
    planner certifies both chains (weak numbers, but proven) for the 20,000 sample examples."""
    from deploy.compose.make_sample import N_TRAIN, ROUND
    from everlast.engine.planner import certify
    from everlast.engine.planner.fill import hand_round
    from everlast.engine.schedule import RoundSpec, Schedule

    spec = RoundSpec.from_dict(ROUND)
    assert hand_round(T=spec.T, lam=spec.lam, R=spec.R, alpha=spec.alpha, m_S=spec.m_S, m_D=spec.m_D,
                      gamma=spec.gamma, beta=spec.beta) == spec
    cert = certify(Schedule((spec,)), N_TRAIN)
    assert cert.query_private and cert.design == "target-charged"
    assert 2 < cert.epsilon_training < 2.3 and 3.5 < cert.epsilon_queries < 3.9
