"""The two designs the engine runs, and the one place that decides what each draws.

A design says how a round turns vote counts into answers and when it fails (docs/privacy/genericbbl.md 1):

``target-charged`` (halting ``noisy``, restarts ``none``), the default: each query's vote count gets
    its own fresh discrete Laplace noise against fixed integer thresholds (no threshold noise, so
    nothing a query could restart); the round fails when an AboveThreshold test on its top count
    fires (or at the hard cap c). Training side: target charging (Lemmas Q and TC); query side:
    Theorem Q with the halting test only. Proven query-private.
``paper`` (halting ``paper``, restarts ``per-top``): BetweenThresholds as in the paper, threshold
    noise redrawn after every top, failure at the c-th top. NOT query-private (both channels of
    docs/privacy/genericbbl.md 4 are open); kept because it is the paper's design and the audits attack it.

Every other (halting, restarts) pair of earlier versions is retired (docs/privacy/genericbbl.md 9 says why).

:func:`noise_plan` turns a round's parameters into the exact integers and rational noise scales the
engine runs with, and raises ``InvalidSchedule`` when the engine cannot run them exactly; the
planner's certifier calls the same function, so a certificate always describes the numbers the
engine uses. :class:`RoundNoise` owns a round's random streams, their scales and the order of the
draws; the predictor, ``engine.diagnostics`` and the audits all draw through it.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from everlast.engine.errors import CorruptState, InvalidSchedule
from everlast.engine.noise import NoiseStream, exact_scale, sample
from everlast.engine.round_spec import COMPLETE_HINT, RoundSpec, integral

I64 = np.int64

MAX_COUNT = 1 << 60
"""The largest T, c and c0 the engine runs: a count plus a saturated noise (|Z| <= 2^62) plus a
threshold stays inside int64."""
MAX_QUERIES = 1 << 62
"""The largest R (queries per round) the engine counts."""
MAX_D_HAT = 1 << 32
"""The largest m_D (D-hat, the queries a round keeps) the engine runs: the round transition draws a
uniformly random order of D-hat (``engine.concepts.random_order.MAX_N``)."""
QUERY_BLOCK = 32768
"""Draws per canonical block of a per-query stream (engine.noise): the sampler's cache-friendly size.
A round of fewer queries uses a smaller block (``query_block``): drawing 32768 noises for a round of
600 queries would be waste."""
MIN_QUERY_BLOCK = 256


def query_block(R: int) -> int:
    """The block size of a round of R queries: the power of two >= R, between MIN_QUERY_BLOCK and
    QUERY_BLOCK (a function of the schedule only, so replays draw the same blocks)."""
    return min(QUERY_BLOCK, max(MIN_QUERY_BLOCK, 1 << max(0, R - 1).bit_length()))
THRESHOLD_BLOCK = 1024
"""Draws per canonical block of a per-restart stream (the paper's threshold noise)."""


class Halting(enum.StrEnum):
    """When a round fails. The values are what schedule files spell (``"halting": "paper"``); in code,
    "paper" names the design only (``PAPER``), so the paper's halting rule is ``AT_CAP``."""

    AT_CAP = "paper"
    """Fail at the c-th top of the round (step 3(d)iv): the paper's rule."""
    NOISY = "noisy"
    """Fail when tops + DLap(4/eps_h) >= c0 + DLap(2/eps_h), or at c tops."""


class Restarts(enum.StrEnum):
    PER_TOP = "per-top"
    """Redraw the threshold noise after every top (Observation 2)."""
    NONE = "none"
    """No threshold noise: fixed integer thresholds, fresh noise on every query's count."""


RETIRED = {
    "never": "halting 'never' is retired: the target-charged design (halting 'noisy', restarts 'none') "
             "is proven query-private and needs far less data (docs/privacy/genericbbl.md 9)",
    "private": "restarts 'private' is retired: the target-charged design has no threshold noise to "
               "restart and needs ~10^4 times less data (docs/privacy/genericbbl.md 9)",
    "stateless": "restarts 'stateless' is retired: dominated by the target-charged design "
                 "(docs/privacy/genericbbl.md 9)",
}


@dataclass(frozen=True, slots=True)
class Design:
    """A validated (halting, restarts) pair: ``Design.parse`` is the only way from strings."""

    halting: Halting
    restarts: Restarts

    def __post_init__(self) -> None:
        # A plain string equals its StrEnum member, so Design("noisy", "none") == DEFAULT; coerce, or
        # such a value would pass this check yet not be ``target_charged`` (an ``is`` test).
        try:
            object.__setattr__(self, "halting", Halting(self.halting))
            object.__setattr__(self, "restarts", Restarts(self.restarts))
        except ValueError:
            raise InvalidSchedule(f"unknown design; the designs are {', '.join(_HELP)}") from None
        if (self.halting, self.restarts) not in _NAMES:
            raise InvalidSchedule(f"no design runs halting {self.halting.value!r} with restarts "
                                  f"{self.restarts.value!r}; the designs are {', '.join(_HELP)}")

    @classmethod
    def parse(cls, halting: Any, restarts: Any) -> Design:
        for value in (halting, restarts):
            if isinstance(value, str) and value in RETIRED:
                raise InvalidSchedule(RETIRED[value])
        try:
            pair = Halting(halting), Restarts(restarts)
        except ValueError:
            raise InvalidSchedule(f"unknown design (halting {str(halting)[:20]!r}, restarts "
                                  f"{str(restarts)[:20]!r}); the designs are {', '.join(_HELP)}") from None
        return cls(*pair)

    @classmethod
    def named(cls, name: str) -> Design:
        for pair, n in _NAMES.items():
            if n == name:
                return cls(*pair)
        raise InvalidSchedule(f"unknown design {name[:40]!r}; known: {', '.join(_NAMES.values())}")

    @property
    def name(self) -> str:
        return _NAMES[(self.halting, self.restarts)]

    @property
    def query_private(self) -> bool:
        """Whether docs/PRIVACY.md proves the queries private under this design (Theorem Q)."""
        return self.name == "target-charged"

    @property
    def target_charged(self) -> bool:
        return self.restarts is Restarts.NONE

    def to_dict(self) -> dict[str, str]:
        return {"halting": self.halting.value, "restarts": self.restarts.value}


_NAMES = {
    (Halting.NOISY, Restarts.NONE): "target-charged",
    (Halting.AT_CAP, Restarts.PER_TOP): "paper",
}
_HELP = ("target-charged (halting 'noisy', restarts 'none'; the default)",
         "paper (halting 'paper', restarts 'per-top'; not query-private)")
DEFAULT = Design(Halting.NOISY, Restarts.NONE)
PAPER = Design(Halting.AT_CAP, Restarts.PER_TOP)


@dataclass(frozen=True, slots=True)
class NoisePlan:
    """The integers and exact scales one round runs with (counts are votes out of T)."""

    T: int
    R: int
    """Queries the round answers (fixes the per-query streams' block size, ``query_block``)."""
    lo: int
    """Lower threshold on the vote count: ceil(T (1/2 - gamma)) (the band rounded inward)."""
    hi: int
    """Upper threshold on the vote count: floor(T (1/2 + gamma))."""
    query: Fraction
    """Scale of the per-query noise on the count: paper 6/eps'; target-charged 1/eps0."""
    threshold: Fraction | None
    """Scale of the threshold noise mu (paper: 2/eps'), redrawn after each top."""
    halt_query: Fraction | None
    """Scale of the halting test's per-query noise xi (noisy: 4/eps_h)."""
    halt_threshold: Fraction | None
    """Scale of the halting test's threshold noise rho_h (noisy: 2/eps_h), once per round."""
    c: int
    """Hard cap on the round's tops: the round fails at c tops."""
    c0: int | None
    """Threshold of the noisy halting test (noisy only)."""

    @property
    def band(self) -> int:
        """hi - lo: the band's width in counts (hi - lo + 1 counts are inside it)."""
        return self.hi - self.lo


@functools.lru_cache(maxsize=1024)
def capacity_problem(spec: RoundSpec) -> str:
    """'' if this engine can hold the round, else why not. Unlike ``noise_plan`` this is not about
    exactness (a certificate still describes the mechanism), only about what one engine runs:
    D-hat's m_D points are kept in memory and put in a random order of at most 2^32 elements."""
    if spec.m_D > MAX_D_HAT:
        return (f"m_D = {spec.m_D} is beyond the largest D-hat the engine's round transition orders "
                "(2^32 points)")
    return ""


@functools.lru_cache(maxsize=1024)
def noise_plan(design: Design, spec: RoundSpec) -> NoisePlan:
    """The exact round the engine runs for ``spec`` under ``design``; ``InvalidSchedule`` (naming
    the field) when it cannot run it exactly. A pure function of two frozen values (cached: a
    schedule's last round repeats, and every transition asks for it)."""
    T = spec.T
    if not 1 <= T <= MAX_COUNT:
        raise InvalidSchedule(f"T = {T} is beyond what the engine counts exactly (2^60)")
    if spec.R > MAX_QUERIES:
        raise InvalidSchedule(f"R = {spec.R} is beyond what the engine counts exactly (2^62)")
    if not 1 <= spec.c <= MAX_COUNT:
        raise InvalidSchedule(f"c = {spec.c} is outside [1, 2^60]")
    g = Fraction(spec.band)
    lo = math.ceil(T * (Fraction(1, 2) - g))
    hi = math.floor(T * (Fraction(1, 2) + g))
    if hi < lo:
        raise InvalidSchedule(f"the band holds no vote count at T = {T} (gamma too small)")
    return spec_of(design).noise(spec, lo, hi)


def _paper_noise(spec: RoundSpec, lo: int, hi: int) -> NoisePlan:
    """Step 3(d): DLap(6/eps') on each count, DLap(2/eps') on the threshold, redrawn after each top."""
    eps = spec.eps_bt
    return NoisePlan(spec.T, spec.R, lo, hi, exact_scale(6.0 / eps), exact_scale(2.0 / eps), None, None, spec.c,
                     None)


def _target_charged_noise(spec: RoundSpec, lo: int, hi: int) -> NoisePlan:
    """DLap(1/eps0) on each count against fixed thresholds; the halting test's DLap(4/eps_h) per query
    and DLap(2/eps_h) once per round (docs/privacy/genericbbl.md 5)."""
    if spec.halt_eps is None or spec.halt_threshold is None:
        raise InvalidSchedule("the target-charged design needs halt_eps and halt_threshold")
    c0 = integral(spec.halt_threshold, "halt_threshold")
    if not 1 <= c0 <= MAX_COUNT:
        raise InvalidSchedule("halt_threshold must lie in [1, 2^60]")
    return NoisePlan(spec.T, spec.R, lo, hi, exact_scale(1.0 / spec.eps_bt), None, exact_scale(4.0 / spec.halt_eps),
                     exact_scale(2.0 / spec.halt_eps), spec.c, c0)


def _paper_fields(r: RoundSpec, where: str) -> None:
    if r.delta_bt is None or not 0 < r.delta_bt < 1:
        raise InvalidSchedule(f"{where}: the paper's design needs delta_bt in (0, 1)")


def _target_charged_fields(r: RoundSpec, where: str) -> None:
    if r.halt_eps is None and r.halt_threshold is None:
        raise InvalidSchedule(f"{where}: the target-charged design (the default) needs halt_eps and "
                              f"halt_threshold: {COMPLETE_HINT}")
    if r.halt_eps is None or not (math.isfinite(r.halt_eps) and r.halt_eps > 0):
        raise InvalidSchedule(f"{where}: the target-charged design needs a positive halt_eps")
    if r.halt_threshold is None or not 1 <= r.halt_threshold <= r.c:
        raise InvalidSchedule(f"{where}: the target-charged design needs an integer halt_threshold in [1, c]")
    if r.delta_bt is not None and not 0 < r.delta_bt < 1:
        raise InvalidSchedule(f"{where}: delta_bt must lie in (0, 1) when given")


@dataclass(frozen=True, slots=True)
class DesignSpec:
    """Everything the engine knows about one design, in one place: its round noise (``noise_plan``'s
    last step) and the round fields it needs (``engine.schedule.validate``). The planner's side of a
    design is ``engine.planner.design_rules.rules(design)`` (its chain, checks and round solver) and
    the audits' is ``adversary_sim.audit.games.AUDIT_ROUNDS[design]``: one table per layer, each keyed
    by the ``Design`` (tests/engine/test_design_registry.py checks that all three name every design)."""

    design: Design
    noise: Callable[[RoundSpec, int, int], NoisePlan]
    """The exact noise scales and integers of a round (band [lo, hi] already checked)."""
    check_fields: Callable[[RoundSpec, str], None]
    """Raises ``InvalidSchedule`` (prefixed with ``where``) when a round lacks a field the design needs."""


SPECS: dict[Design, DesignSpec] = {
    DEFAULT: DesignSpec(DEFAULT, _target_charged_noise, _target_charged_fields),
    PAPER: DesignSpec(PAPER, _paper_noise, _paper_fields),
}
"""The engine's one registry of designs (one entry per design in ``_NAMES``)."""


def spec_of(design: Design) -> DesignSpec:
    """The engine's side of ``design``."""
    return SPECS[design]


# -- the streams ------------------------------------------------------------------------------


class Purpose(enum.IntEnum):
    """What a stream is for; its value is part of the seed's spawn key (part of the format)."""

    SAMPLING = 0
    QUERY = 1
    THRESHOLD = 2
    HALT_QUERY = 3
    HALT_THRESHOLD = 4
    ORDER = 5
    """S_{i+1}'s uniform order at a transition: its own stream, so it can be drawn beside LabelBoost
    (``engine.overlap``) with the same result."""
    QUOTA_QUERY = 6
    """The per-client quota test's per-query noise xi'_j (``engine.quotas``), one per query of the round."""
    QUOTA_THRESHOLD = 7
    """A client's quota threshold noise rho'_k: one stream per (round, client), keyed by the client's
    64-bit key (``client_generator``)."""
    BURN = 8
    """The burn-rate signal's noise, one per released window (``engine.burn``)."""


def generator(entropy: int, round_index: int, purpose: Purpose) -> np.random.Generator:
    """The PCG64 stream of ``purpose`` in round ``round_index``: independent of every other
    (numpy SeedSequence spawn keys), and the same in every replay."""
    ss = np.random.SeedSequence(entropy, spawn_key=(round_index, int(purpose)))
    return np.random.Generator(np.random.PCG64(ss))


def client_generator(entropy: int, round_index: int, purpose: Purpose, key: int) -> np.random.Generator:
    """The PCG64 stream of ``purpose`` for the client with 64-bit ``key`` (``engine.clients.client_key``)
    in round ``round_index``: spawn key (round, purpose, key), so it is independent of every other
    stream, of every other client's, and of how the queries were batched."""
    ss = np.random.SeedSequence(entropy, spawn_key=(round_index, int(purpose), int(key)))
    return np.random.Generator(np.random.PCG64(ss))


@dataclass(frozen=True, slots=True)
class RoundNoise:
    """A round's noise: which streams a design draws, with which scales, in which order.

    Immutable; every draw returns the values and the ``RoundNoise`` after them. Per query, in this
    order of streams (each stream's own order is the query order, whatever the batching):
      paper:          nu_j (QUERY); mu at the round start and after each top (THRESHOLD);
      target-charged: z_j (QUERY), xi_j (HALT_QUERY) for every query whatever happens;
                      rho_h once at the round start (HALT_THRESHOLD).
    """

    design: Design
    plan: NoisePlan
    query: NoiseStream
    threshold: NoiseStream | None
    halt_query: NoiseStream | None

    @classmethod
    def start(cls, design: Design, plan: NoisePlan, entropy: int, round_index: int) -> tuple[RoundNoise, int]:
        """The round's streams at its start, and its first threshold draw (mu for paper, rho_h for
        target-charged)."""

        def stream(purpose: Purpose, scale: Fraction, block: int) -> NoiseStream:
            return NoiseStream.fresh(generator(entropy, round_index, purpose), scale, block)

        block = query_block(plan.R)
        q = stream(Purpose.QUERY, plan.query, block)
        if design.target_charged:
            assert plan.halt_query is not None and plan.halt_threshold is not None
            hq = stream(Purpose.HALT_QUERY, plan.halt_query, block)
            # rho_h is the stream's only draw: a block of one from its start, as ``take(1)`` would
            # draw it, without keeping (encoding, decoding) a stream that is then dropped
            rho = sample(generator(entropy, round_index, Purpose.HALT_THRESHOLD), plan.halt_threshold, 1)
            return cls(design, plan, q, None, hq), int(rho[0])
        assert plan.threshold is not None
        th = stream(Purpose.THRESHOLD, plan.threshold, THRESHOLD_BLOCK)
        mu, th = th.take(1)
        return cls(design, plan, q, th, None), int(mu[0])

    def per_query(self, n: int) -> tuple[np.ndarray[Any, np.dtype[np.int64]],
                                         np.ndarray[Any, np.dtype[np.int64]] | None, RoundNoise]:
        """The per-query noises of the next n queries: (nu or z, xi or None) and the noise after."""
        a, q = self.query.take(n)
        if self.halt_query is None:
            return a, None, RoundNoise(self.design, self.plan, q, self.threshold, None)
        b, hq = self.halt_query.take(n)
        return a, b, RoundNoise(self.design, self.plan, q, self.threshold, hq)

    def next_threshold(self) -> tuple[int, RoundNoise]:
        """The paper design's next threshold noise mu (after a top)."""
        if self.threshold is None:
            raise InvalidSchedule("the target-charged design has no threshold noise")
        mu, th = self.threshold.take(1)
        return int(mu[0]), RoundNoise(self.design, self.plan, self.query, th, self.halt_query)

    def to_dict(self) -> dict[str, Any]:
        return {name: None if s is None else s.to_dict()
                for name, s in (("query", self.query), ("threshold", self.threshold),
                                ("halt_query", self.halt_query))}

    @classmethod
    def from_dict(cls, design: Design, plan: NoisePlan, d: dict[str, Any]) -> RoundNoise:
        try:
            q = NoiseStream.from_dict(d["query"])
            th = None if d["threshold"] is None else NoiseStream.from_dict(d["threshold"])
            hq = None if d["halt_query"] is None else NoiseStream.from_dict(d["halt_query"])
        except (KeyError, TypeError) as exc:
            raise CorruptState(f"round noise state is malformed ({type(exc).__name__})") from None
        want = (plan.query, plan.threshold, plan.halt_query)
        got = (q.scale, None if th is None else th.scale, None if hq is None else hq.scale)
        if want != got:
            raise CorruptState("round noise does not match the schedule's scales")
        blocks = (q.block, None if th is None else th.block, None if hq is None else hq.block)
        qb = query_block(plan.R)
        if blocks != (qb, None if th is None else THRESHOLD_BLOCK, None if hq is None else qb):
            raise CorruptState("round noise blocks do not match this engine version")
        return cls(design, plan, q, th, hq)
