"""The compose stack's sample model files, and a small query stream for it.

    python deploy/compose/make_sample.py data [--out deploy/compose/sample]
        writes sample/train.csv (20,000 labeled points, threshold concept, header row "x,y") and
        sample/schedule.json (one small round, repeated). Deterministic: the committed files are
        exactly what this writes (tests/deploy checks it).

    python make_sample.py produce --bootstrap-servers kafka:9092 [--queries N] [--rate QPS] [--clients K]
        produces N queries for model "sample" to everlast.queries (msgpack values, keyed by model id,
        aiokafka's default murmur2 partitioner), query i from client loadgen-(i mod K) (the
        everlast-client header, as a gateway would set it: the sample model runs per-client quotas, and
        one client sending a whole round of i.i.d. queries would spend more than its share); the
        compose service `loadgen` runs it.

The data mode needs only the standard library; the produce mode needs aiokafka and msgpack (both
in the everlast image).

PRIVACY: the sample schedule is sized to run in seconds on 20,000 examples, under the default
(query-private) design. A schedule this small certifies only weak epsilons (about 2.1 for the
training set, 4.0 for a query with the sample's quotas and burn-rate signal; the
everlast_guarantee_epsilon gauge shows them); it demonstrates the plumbing, not a private
deployment. Real deployments plan a schedule from targets (`everlast plan`, or [models.targets]).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path

MODEL = "sample"
THRESHOLD = 0.37
"""The hidden concept: label 1 iff x >= THRESHOLD (the concept class is thresholds on [0, 1))."""
N_TRAIN = 20_000
SEED = 20240601
ROUND = {
    # T = 4,000 classifiers of lam = 5 examples each (|S_1| = 20,000), rounds of R = 20,000 queries,
    # every query of a round kept for the next (m_D = R). The default design (target-charged), sized
    # by engine.planner.fill.hand_round (tests/deploy checks these numbers are what it writes): eps0
    # (eps_bt) is the accuracy floor for gamma = 0.2, and the hard cap c = 4,937 twice the tops
    # uniform queries spend (R ln(1/(1 - 2 gamma)) / lam ~ 2,040, docs/halt_budget.md) plus the
    # halting test's margins: the test (eps_h = 0.2) fires near c0 = 4,514 tops. The planner
    # certifies training-set epsilon ~2.1 and query epsilon ~3.7 (delta 1e-6; ~4.0 with the compose
    # config's quotas and burn-rate signal): proven, and weak.
    "T": 4_000,
    "lam": 5,
    "R": 20_000,
    "c": 4_937,
    "eps_bt": 0.00423,
    "delta_bt": None,
    "alpha": 0.1,
    "m_S": 400,
    "m_D": 20_000,
    "gamma": 0.2,
    "beta": 0.05,
    "halt_eps": 0.2,
    "halt_threshold": 4_514,
}


def train_csv() -> str:
    g = random.Random(SEED)
    lines = ["x,y"]
    for _ in range(N_TRAIN):
        x = round(g.random(), 4)  # label the value as written
        lines.append(f"{x:.4f},{int(x >= THRESHOLD)}")
    return "\n".join(lines) + "\n"


def schedule_json() -> str:
    doc = {"rounds": [ROUND], "repeat_last": True, "design": "target-charged", "halting": "noisy",
           "restarts": "none"}
    return json.dumps(doc, indent=2) + "\n"


def write_data(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    files = {out / "train.csv": train_csv(), out / "schedule.json": schedule_json()}
    for path, text in files.items():
        path.write_text(text)
    return list(files)


async def produce(
    bootstrap_servers: str,
    topic: str = "everlast.queries",
    queries: int = 60_000,
    rate: float = 200.0,
    model: str = MODEL,
    seed: int = 1,
    start_id: int = 0,
    clients: int = 4,
) -> int:
    """Produce ``queries`` uniform points at about ``rate`` per second, query i from client
    ``loadgen-(i mod clients)`` (the everlast-client header; 0: no header, the anonymous client);
    returns the count sent."""
    import msgpack
    from aiokafka import AIOKafkaProducer

    g = random.Random(seed)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers, linger_ms=5)
    await producer.start()
    try:
        sent, t0, chunk = 0, time.monotonic(), max(1, int(rate // 10))
        while sent < queries:
            n = min(chunk, queries - sent)
            futs = [
                await producer.send(
                    topic, key=model.encode(), value=msgpack.packb({"id": start_id + sent + i, "x": g.random()}),
                    headers=client_header(sent + i, clients),
                )
                for i in range(n)
            ]
            await asyncio.gather(*futs)
            sent += n
            ahead = sent / rate - (time.monotonic() - t0)
            if ahead > 0:
                await asyncio.sleep(ahead)
    finally:
        await producer.stop()
    return sent


def client_header(i: int, clients: int) -> list[tuple[str, bytes]]:
    """Query i's client header: loadgen-(i mod clients), or none (the anonymous client)."""
    return [("everlast-client", f"loadgen-{i % clients}".encode())] if clients > 0 else []


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("data", help="write train.csv and schedule.json")
    d.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "sample")
    p = sub.add_parser("produce", help="produce sample queries")
    p.add_argument("--bootstrap-servers", required=True)
    p.add_argument("--topic", default="everlast.queries")
    p.add_argument("--queries", type=int, default=60_000)
    p.add_argument("--rate", type=float, default=200.0, help="queries per second")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--clients", type=int, default=4,
                   help="client ids the queries come from (the everlast-client header; 0: none, anonymous)")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    if a.cmd == "data":
        for path in write_data(a.out):
            print(f"wrote {path}")
        return 0
    n = asyncio.run(produce(a.bootstrap_servers, a.topic, a.queries, a.rate, seed=a.seed, clients=a.clients))
    print(f"produced {n} queries for model {MODEL!r} to {a.topic}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
