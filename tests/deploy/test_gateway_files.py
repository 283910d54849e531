"""The gateway in the deployment files: the compose service and the Kubernetes objects load their
configuration with their environment, publish and probe the ports the gateway listens on, check the
daemon's readiness where the daemon serves it, and the Kafka ACL script grants the topics' writes and
reads to the gateway and the daemon only."""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath
from typing import Any

import pytest
import yaml

from everlast.daemon.gateway.auth import key_hash, new_key
from tests.deploy.helpers import (
    COMPOSE_TOML,
    DEPLOY,
    K8S_DIR,
    check_env_settings,
    compose,
    env_of,
    host_path,
    load_with_env,
)

ACLS = DEPLOY / "kafka" / "acls.sh"


def _keys_json() -> str:
    return json.dumps([{"client": "alice", "sha256": key_hash(new_key())}])


def test_the_compose_gateway_loads_its_config_and_probes_its_own_port(monkeypatch: pytest.MonkeyPatch) -> None:
    c = compose()
    s, daemon = c["services"]["gateway"], c["services"]["everlast"]
    assert s["image"] == daemon["image"] and s["command"][:2] == ["gateway", "--config"]
    cfg_path = host_path(s, s["command"][2])
    assert cfg_path is not None and cfg_path.samefile(COMPOSE_TOML)
    env = env_of(s)
    assert check_env_settings(env) == []
    assert env["EVERLAST_GATEWAY__KEYS"] == "[]"  # no key shipped: the operator creates them
    cfg = load_with_env(monkeypatch, COMPOSE_TOML, {**env, "EVERLAST_GATEWAY__KEYS": _keys_json()})
    g = cfg.gateway
    assert g.host == "0.0.0.0" and g.metrics_host == "0.0.0.0" and len(g.keys) == 1
    assert {f"127.0.0.1:{g.port}:{g.port}", f"127.0.0.1:{g.metrics_port}:{g.metrics_port}"} <= set(s["ports"])
    assert f":{g.port}/healthz" in " ".join(s["healthcheck"]["test"])
    daemon_cfg = load_with_env(monkeypatch, COMPOSE_TOML, env_of(daemon))
    assert g.daemon_readyz == [f"http://everlast:{daemon_cfg.metrics.port}/readyz"]
    assert s["depends_on"]["everlast"]["condition"] == "service_healthy"
    assert cfg.topics == daemon_cfg.topics and cfg.consumer.client_header == daemon_cfg.consumer.client_header
    prom = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    (job,) = [j for j in prom["scrape_configs"] if j["job_name"] == "everlast-gateway"]
    assert job["static_configs"][0]["targets"] == [f"gateway:{g.metrics_port}"]


def _gateway_objects() -> dict[str, dict[str, Any]]:
    kust = yaml.safe_load((K8S_DIR / "kustomization.yaml").read_text())
    assert "gateway.yaml" in kust["resources"]
    return {d["kind"]: d for d in yaml.safe_load_all((K8S_DIR / "gateway.yaml").read_text())}


def test_the_k8s_gateway_fits_its_service_configmap_and_secret(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    k = _gateway_objects()
    dep, svc = k["Deployment"], k["Service"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert svc["spec"]["selector"].items() <= labels.items()
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert svc["spec"]["ports"][0]["targetPort"] in ports
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz" and c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    env = {e["name"]: str(e.get("value", "")) for e in c["env"]}
    assert check_env_settings(env) == []
    (ref,) = [e["valueFrom"]["secretKeyRef"] for e in c["env"] if e["name"] == "EVERLAST_GATEWAY__KEYS"]
    assert ref["name"] == "everlast-gateway-keys"
    readme = (K8S_DIR / "README.md").read_text()
    assert f"kubectl create secret generic {ref['name']}" in readme and f"--from-literal={ref['key']}=" in readme
    cm = yaml.safe_load((K8S_DIR / "configmap.yaml").read_text())
    (vol,) = dep["spec"]["template"]["spec"]["volumes"]
    assert vol["configMap"]["name"] == cm["metadata"]["name"]
    toml = tmp_path / "everlast.toml"
    toml.write_text(cm["data"]["everlast.toml"])
    mount = next(m["mountPath"] for m in c["volumeMounts"] if m["name"] == vol["name"])
    assert c["args"] == ["gateway", "--config", str(PurePosixPath(mount) / "everlast.toml")]
    env["EVERLAST_GATEWAY__KEYS"] = _keys_json()
    cfg = load_with_env(monkeypatch, toml, env)
    g = cfg.gateway
    assert ports == {"http": g.port, "metrics": g.metrics_port} and g.host == g.metrics_host == "0.0.0.0"
    ann = dep["spec"]["template"]["metadata"]["annotations"]
    assert int(ann["prometheus.io/port"]) == g.metrics_port
    assert g.daemon_readyz == [f"http://everlast:{cfg.metrics.port}/readyz"]  # the daemons' headless Service
    sts = yaml.safe_load((K8S_DIR / "statefulset.yaml").read_text())
    assert c["image"] == sts["spec"]["template"]["spec"]["containers"][0]["image"]
    assert c["securityContext"]["readOnlyRootFilesystem"] and dep["spec"]["template"]["spec"]["securityContext"][
        "runAsNonRoot"]


def test_the_acls_give_queries_and_labels_to_the_gateway_and_the_daemon_only() -> None:
    text = ACLS.read_text()
    grants = re.findall(r'^acl --allow-principal "\$(\w+)" (.*?) --(topic|group) "\$(\w+)"$', text, re.M)
    table: dict[tuple[str, str], set[str]] = {}
    for who, ops, _, res in grants:
        table.setdefault((who, res), set()).update(re.findall(r"--operation (\w+)", ops))
    assert table[("GATEWAY", "QUERIES")] == {"Write", "Describe"}
    assert table[("GATEWAY", "LABELS")] == {"Read", "Describe"}
    assert table[("DAEMON", "QUERIES")] == {"Read", "Describe"}
    assert "Write" in table[("DAEMON", "LABELS")] and "Read" not in table[("DAEMON", "LABELS")]
    writers_of_queries = {w for (w, r), ops in table.items() if r == "QUERIES" and "Write" in ops}
    readers_of_labels = {w for (w, r), ops in table.items() if r == "LABELS" and "Read" in ops}
    assert writers_of_queries == {"GATEWAY"} and readers_of_labels == {"GATEWAY"}
    from everlast.daemon.config import ConsumerConfig, TopicsConfig

    t = TopicsConfig()
    for var, name in (("QUERIES", t.queries), ("LABELS", t.labels), ("DEAD_LETTERS", t.dead_letters),
                      ("CHECKPOINTS", t.checkpoints), ("GROUP", ConsumerConfig().group_id)):
        assert f"{var}=${{{var}:-{name}}}" in text, var
