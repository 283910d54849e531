"""The availability game through the gateway: the README's boundary prober holds one credential, an
i.i.d. client another, on the compose sample's model with its per-client quotas. The gateway stamps
each credential's client id, so the prober is refused ``client-quota`` and the honest client is
answered in full, as in the game played on Kafka with honest headers
(tests/adversary/test_availability_kafka.py)."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pytest

from tests.gateway.conftest import Stack

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]


async def play(s: Stack, credentials: dict[str, str], queries: dict[str, int], batch: dict[str, int],
               seed: int = 0) -> dict[str, dict[str, Any]]:
    """Clients take turns, one request each per step (each answered before the next is sent, so the
    log's order is fixed); adaptive streams see their own labels."""
    from everlast.adversary_sim.iid import make_task
    from everlast.adversary_sim.prober import BoundaryProber
    from everlast.adversary_sim.streams import IIDStream
    from everlast.daemon.wire import refusal_code
    from everlast.engine.concepts import from_spec

    task = make_task(from_spec({"name": "thresholds"}), "uniform", seed=seed)
    streams = {"prober": BoundaryProber(task, seed), "honest": IIDStream(task, seed + 1)}
    stats = {c: {"sent": 0, "ok": 0, "refused": 0, "reasons": {}} for c in credentials}
    async with httpx.AsyncClient(base_url=s.url, timeout=120) as h:
        while any(stats[c]["sent"] < queries[c] for c in credentials):
            for c, key in credentials.items():
                st = stats[c]
                n = min(batch[c], queries[c] - st["sent"])
                if n <= 0:
                    continue
                stream = streams[c]
                x = np.asarray(stream.next_batch(n)[0], dtype=np.float64).tolist()
                body = {"queries": [{"id": st["sent"] + k, "x": v} for k, v in enumerate(x)]}
                r = await h.post("/v1/models/sample/predict", json=body, headers={"Authorization": f"Bearer {key}"})
                assert r.status_code == 200, r.text
                labels = []
                for rec in r.json()["labels"]:
                    if rec["status"] == "ok":
                        st["ok"] += 1
                        labels.append(rec["label"])
                    else:
                        st["refused"] += 1
                        code = refusal_code(rec.get("reason"))
                        st["reasons"][code] = st["reasons"].get(code, 0) + 1
                        labels.append(-1)
                st["sent"] += n
                if stream.adaptive:
                    stream.observe(np.asarray(labels, dtype=np.int8))
    return stats


async def test_the_prober_is_refused_client_quota_and_the_honest_client_answered_in_full(stack: Stack) -> None:
    creds = {"prober": stack.keys["prober"], "honest": stack.keys["honest"]}
    out = await play(stack, creds, {"prober": 10_000, "honest": 5_000}, {"prober": 100, "honest": 50})
    assert out["honest"] == {"sent": 5_000, "ok": 5_000, "refused": 0, "reasons": {}}
    p = out["prober"]
    assert p["sent"] == 10_000 and p["refused"] > 5_000 and set(p["reasons"]) == {"client-quota"}
    from everlast.engine.phases import Phase

    served = next(m for pr in stack.service.procs.values() for m in pr.models.values() if m.id == "sample")
    assert served.phase is not Phase.HALTED and served.round == 1
