"""Suite-wide settings.

The planner's on-disk cache (everlast.daemon.plan_cache) is a fresh directory per test process, so that
no run reads what another run (or the developer's own ``everlast plan``) kept, and none writes to the
home directory. Tests that time or pin the search itself turn it off (tests/planner/test_plan_kat.py).
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_PLANS: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    _PLANS.append(tempfile.mkdtemp(prefix="everlast-test-plans-"))
    os.environ["EVERLAST_PLAN_CACHE"] = _PLANS[-1]


def pytest_unconfigure(config: pytest.Config) -> None:
    for d in _PLANS:
        shutil.rmtree(d, ignore_errors=True)
