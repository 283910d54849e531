"""What a certificate guarantees, in words (``everlast simulate``, ``everlast demo``)."""

from __future__ import annotations

import math

from everlast.engine.planner import Certificate
from everlast.engine.planner.report import strength

__all__ = ["plain_guarantee", "strength"]


def plain_guarantee(cert: Certificate) -> str:
    """One honest sentence about what this run certifies."""
    if math.isfinite(cert.epsilon_training):
        train = (
            f"training set: ({cert.epsilon_training:.4g}, {cert.delta_training:.2g})-DP "
            f"({strength(cert.epsilon_training)}; {cert.accounting} accounting)"
        )
    else:
        train = f"training set: no guarantee ({cert.training_reason})"
    if cert.query_private:
        return (f"{train}; queries: ({cert.epsilon_queries:.4g}, {cert.delta_queries:.2g})-DP "
                f"({strength(cert.epsilon_queries)})")
    if cert.design == "target-charged":  # proven query-private: not certified only under the paper's accounting
        return f"{train}; queries: no guarantee ({cert.queries_reason or 'use the tight accounting'})"
    cond = cert.epsilon_queries_conditional
    cond_s = f"{cond:.4g}" if math.isfinite(cond) else "none"
    return (
        f"{train}; queries: NOT certified under this design (the published chain would give "
        f"epsilon {cond_s}, but its in-round step is false: docs/PRIVACY.md)"
    )
