"""Strict schedules (engine.fields): a schedule loads exactly the values its file holds, or is refused
with an error naming the field. The probe: the sample round with ``"lam": 5.9, "T": 4000.5`` used to run
as lam 5 and T 4000, and ``"T": true`` as T = 1, under a certificate describing values never written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from everlast.engine.burn import Burn
from everlast.engine.errors import InvalidSchedule
from everlast.engine.quotas import Quotas
from everlast.engine.schedule import RoundSpec, Schedule
from tests.engine.helpers import BURN, QUOTAS, schedule


def sample(**over: Any) -> dict[str, Any]:
    d = schedule("target-charged").to_dict()
    d["rounds"][0].update(over)
    return d


@pytest.mark.parametrize(("over", "match"), [
    ({"lam": 5.9}, r"round 1: lam must be an integer, not 5\.9"),
    ({"T": 4000.5}, r"round 1: T must be an integer, not 4000\.5"),
    ({"lam": 5.9, "T": 4000.5}, r"round 1: (lam|T) must be an integer"),
    ({"T": True}, r"round 1: T must be an integer, not True"),
    ({"R": "600"}, r"round 1: R must be an integer, not '600'"),
    ({"c": float("inf")}, r"round 1: c must be an integer"),
    ({"m_S": None}, r"round 1: m_S must be an integer, not None"),
    ({"halt_threshold": False}, r"round 1: halt_threshold must be an integer"),
    ({"eps_bt": "0.5"}, r"round 1: eps_bt must be a number, not '0\.5'"),
    ({"alpha": True}, r"round 1: alpha must be a number, not True"),
    ({"gamma": [0.1]}, r"round 1: gamma must be a number"),
])
def test_a_round_field_of_the_wrong_type_is_refused_by_name(over: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidSchedule, match=match):
        Schedule.from_dict(sample(**over))


def test_the_error_names_the_round() -> None:
    d = schedule("target-charged", rounds=3, repeat_last=False).to_dict()
    d["rounds"][2]["lam"] = 5.9
    with pytest.raises(InvalidSchedule, match=r"^round 3: lam must be an integer, not 5\.9$"):
        Schedule.from_dict(d)


def test_integral_floats_and_nulls_where_allowed_load_as_written() -> None:
    """JSON may write an integer as 4000.0 (or 5e1); it loads as the int; an optional field takes null."""
    good = Schedule.from_dict(sample())
    d = sample(T=50.0, lam=1e1, halt_threshold=300.0, gamma=None)
    s = Schedule.from_dict(d)
    r = s.rounds[0]
    assert (r.T, r.lam, r.halt_threshold) == (50, 10, 300)
    assert all(type(getattr(r, f)) is int for f in ("T", "lam", "R", "c", "m_S", "m_D", "halt_threshold"))
    assert s == good
    assert Schedule.from_dict(json.loads(json.dumps(good.to_dict()))) == good
    import numpy as np  # a caller in process may hand numpy scalars (numpy's bool is refused like bool)

    assert Schedule.from_dict(sample(T=np.int64(50), alpha=np.float64(0.1))) == good
    with pytest.raises(InvalidSchedule, match="round 1: lam must be an integer"):
        Schedule.from_dict(sample(lam=np.True_))


def test_unknown_and_missing_round_fields_are_refused() -> None:
    with pytest.raises(InvalidSchedule, match=r"round 1: unknown fields \['lambda'\]"):
        Schedule.from_dict(sample(**{"lambda": 10}))
    d = sample()
    del d["rounds"][0]["c"]
    with pytest.raises(InvalidSchedule, match=r"round 1 needs the fields \['c'\]"):
        Schedule.from_dict(d)
    with pytest.raises(InvalidSchedule, match="round must be an object"):
        RoundSpec.from_dict([1, 2])  # type: ignore[arg-type]


def test_repeat_last_must_be_a_boolean() -> None:
    d = sample()
    d["repeat_last"] = "false"  # bool("false") is True: it would have repeated the last round
    with pytest.raises(InvalidSchedule, match=r"repeat_last must be true or false, not 'false'"):
        Schedule.from_dict(d)


@pytest.mark.parametrize(("cls", "d", "match"), [
    (Quotas, {**QUOTAS, "share": True}, r"quotas: share must be a number, not True"),
    (Quotas, {**QUOTAS, "eps": "1"}, r"quotas: eps must be a number"),
    (Burn, {**BURN, "window": True}, r"burn: window must be an integer, not True"),
    (Burn, {**BURN, "window": 20.5}, r"burn: window must be an integer, not 20\.5"),
    (Burn, {**BURN, "eps": None}, r"burn: eps must be a number, not None"),
])
def test_quotas_and_burn_are_read_by_the_same_validator(cls: Any, d: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidSchedule, match=match):
        cls.from_dict(d)
    full = schedule("target-charged").to_dict()
    full[cls.__name__.lower()] = d
    with pytest.raises(InvalidSchedule, match=match):
        Schedule.from_dict(full)


def test_the_daemon_refuses_the_probe_schedule_naming_model_and_field(tmp_path: Path) -> None:
    from everlast.daemon.config import load
    from everlast.daemon.errors import ConfigError
    from everlast.daemon.model import ModelRuntime

    (tmp_path / "s.json").write_text(json.dumps(sample(lam=5.9, T=4000.5)))
    (tmp_path / "d.csv").write_text("".join(f"{i / 800},{int(i >= 400)}\n" for i in range(800)))
    (tmp_path / "c.toml").write_text('[[models]]\nid = "m1"\ndata = "d.csv"\nconcept = "thresholds"\n'
                                     'schedule = "s.json"\n')
    with pytest.raises(ConfigError, match=r"model m1: round 1: (lam|T) must be an integer"):
        ModelRuntime.prepare(load(tmp_path / "c.toml").models[0])


@pytest.mark.parametrize("setting", ['quotas = { share = true, eps = 0.2 }', 'burn = { window = true, eps = 0.5 }'])
def test_the_daemons_quota_and_burn_settings_refuse_booleans(tmp_path: Path, setting: str) -> None:
    """The configuration's own quota and burn settings (pydantic would read ``true`` as 1)."""
    from everlast.daemon.config import load
    from everlast.daemon.errors import ConfigError

    (tmp_path / "c.toml").write_text('[[models]]\nid = "m1"\ndata = "d.csv"\nconcept = "thresholds"\n'
                                     f'targets = {{ epsilon = 1.0, delta = 1e-6, alpha = 0.1 }}\n{setting}\n')
    with pytest.raises(ConfigError, match="must be a number, not true"):
        load(tmp_path / "c.toml")
