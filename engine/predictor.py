"""GenericBBL (paper, section 5) as a sans-IO state machine.

Feed it query arrays with ``answer``; when a round's R_i queries are answered it asks for
``transition`` (LabelBoost and refitting, a separate step so the daemon can run it off its event
loop). Answers are a function of (state, query sequence) only: every random draw comes from a
named stream consumed in a fixed order, so any split of a sequence into batches, and any
save/restore in between, gives identical answers.

Round i (step 3):
  (a, b) S_i is cut into T_i chunks of lambda_i; one ERM classifier per chunk (``ConceptClass.fit``).
  (c, d) BetweenThresholds on the votes answers R_i queries: label 0 on L, 1 on R or top; the
         c_i-th top fails the predictor, which from then on refuses every query.
  (e, f) D-hat_i (m_D of the round's queries, reservoir) and S-hat_i (m_S points of S_i) go to
         LabelBoost; S_{i+1} is a random subset of lambda_{i+1} T_{i+1} of the relabeled D-hat_i.
Round 1 takes S_1, a random subset of lambda_1 T_1 points of the training set (step 2); the
training set itself is not kept.

Every public method either succeeds or raises with the predictor unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine import between_thresholds as bt
from engine import phases
from engine.concepts import ConceptClass, Ensemble, from_spec
from engine.concepts.base import RoundStart, check_labels
from engine.errors import CorruptState, InvalidInput, TrainingSetTooSmall
from engine.phases import Phase
from engine.reservoir import Reservoir
from engine.rng import Streams, laplace
from engine.schedule import RoundSpec, Schedule
from engine.serving import Answers, Refusal, RoundInfo

FORMAT = "everlast-engine/3"
"""/3: private restarts have no hard block cap (docs/PRIVACY.md 5.3); a /2 state would resume under
a different mechanism, so it is refused."""
MU_BLOCK = 64


@dataclass(slots=True)
class _Round:
    """Everything that is fixed for the duration of a round (written once per round)."""

    index: int
    spec: RoundSpec
    ensemble: Ensemble
    s_hat_x: NDArray[np.float64]
    s_hat_y: NDArray[np.int8]


class Predictor:
    """The GenericBBL private everlasting predictor. Build with ``create`` or ``from_state``."""

    __slots__ = (
        "_answered", "_bt", "_mu_units", "_phase", "_reservoir", "_round", "concept", "schedule", "streams",
    )

    def __init__(
        self,
        concept: ConceptClass,
        schedule: Schedule,
        streams: Streams,
        rnd: _Round,
        reservoir: Reservoir,
        *,
        phase: Phase,
        answered: int,
        bt_state: bt.BTState,
        mu_units: NDArray[np.float64],
    ) -> None:
        self.concept = concept
        self.schedule = schedule
        self.streams = streams
        self._round = rnd
        self._reservoir = reservoir
        self._phase = phase
        self._answered = answered
        self._bt = bt_state
        self._mu_units = mu_units  # pre-drawn Lap(1) threshold-stream units, consumed front to back

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        concept: ConceptClass,
        schedule: Schedule,
        x: Any,
        y: Any,
        seed: int | None = None,
    ) -> Predictor:
        """Step 2: draw S_1 from the training set (x, y) and start round 1.

        Raises ``InvalidInput`` (empty, NaN/inf, wrong dimension, labels not in {0,1}) or
        ``TrainingSetTooSmall`` (fewer than lambda_1 T_1 examples; the error says how many).
        ``seed=None`` takes the root entropy from the OS.
        """
        xs = concept.validate_points(x, "training")
        n = xs.shape[0]
        if n == 0:
            raise InvalidInput("the training set is empty")
        ys = check_labels(y, n)
        need = schedule.initial_size
        if n < need:
            raise TrainingSetTooSmall(n, need)
        streams = Streams.from_seed(seed)
        pick = streams["sampling"].choice(n, size=need, replace=False)
        first = schedule.rounds[0]
        start = concept.start_round(xs[pick], ys[pick], first.T, first.lam, first.m_S, streams["sampling"])
        return cls._start_round(concept, schedule, streams, 1, start)

    @classmethod
    def _start_round(
        cls,
        concept: ConceptClass,
        schedule: Schedule,
        streams: Streams,
        index: int,
        start: RoundStart,
    ) -> Predictor:
        """Step 3(c) for round ``index``, whose classifiers and S-hat are ``start``."""
        spec = schedule.spec(index)
        assert spec is not None  # guaranteed by validate()
        g = streams["sampling"]
        reservoir = Reservoir.draw(spec.R, spec.m_D, concept.point_dim, g)
        rnd = _Round(index, spec, start.ensemble, start.s_hat_x, start.s_hat_y)
        p = cls(concept, schedule, streams, rnd, reservoir, phase=Phase.ANSWERING, answered=0,
                bt_state=bt.BTState(mu=0.0), mu_units=np.zeros(0))
        mu, rho_r = p._draw_restart()
        rho_h = 2.0 / spec.halt_eps * p._unit() if schedule.halting == "noisy" and spec.halt_eps else 0.0
        p._bt = bt.BTState(mu=mu, rho_r=rho_r, rho_h=rho_h)
        return p

    def _unit(self) -> float:
        """Next Lap(1) draw of the threshold stream, taken in blocks of ``MU_BLOCK``: refills happen
        at the same points of the draw sequence however queries are batched (batch invariance);
        the unused part of the block is part of the state."""
        if self._mu_units.size == 0:
            self._mu_units = laplace(self.streams["threshold_noise"], 1.0, MU_BLOCK)
        unit, self._mu_units = float(self._mu_units[0]), self._mu_units[1:]
        return unit

    def _draw_restart(self) -> tuple[float, float]:
        """A fresh threshold noise mu ~ Lap(2/(eps' T)) and, for private restarts, the restart test's
        threshold noise rho_r ~ Lap(2/eps_r), in that order."""
        spec = self._round.spec
        mu = bt.threshold_noise_scale(spec.eps_bt, spec.T) * self._unit()
        rho = 0.0
        if self.schedule.restarts == "private" and spec.restart_eps:
            rho = 2.0 / spec.restart_eps * self._unit()
        return mu, rho

    def _rules(self) -> bt.Rules:
        spec, sch = self._round.spec, self.schedule
        return bt.Rules(
            restarts=sch.restarts, halting=sch.halting, c=spec.c,
            k0=spec.restart_threshold or 0.0, c0=spec.halt_threshold or 0.0,
        )

    # -- observation ---------------------------------------------------------------------------

    mechanism = "generic-bbl"
    has_rounds = True

    @property
    def point_dim(self) -> int:
        return self.concept.point_dim

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def capacity(self) -> int | None:
        """Queries ``answer`` will consume before a transition is due: 0 when one is due (call
        ``transition``), ``None`` when refusing (every query is consumed, refused)."""
        if self._phase is Phase.TRANSITION_DUE:
            return 0
        if self._phase in phases.REFUSING:
            return None
        return self._round.spec.R - self._answered

    @property
    def round(self) -> int:
        return self._round.index

    @property
    def spec(self) -> RoundSpec:
        return self._round.spec

    @property
    def answered_in_round(self) -> int:
        return self._answered

    @property
    def tops_in_round(self) -> int:
        """Tops used in the current round. Private in the queries (it moves with any one query's
        outcome): do not publish it while the round runs (see docs/PRIVACY.md)."""
        return self._bt.tops

    def round_info(self) -> RoundInfo:
        spec = self._round.spec
        return RoundInfo(answered=self._answered, allowed=spec.R, halt_cap=spec.c, tops=self._bt.tops)

    @property
    def ensemble(self) -> Ensemble:
        return self._round.ensemble

    @property
    def threshold_noise(self) -> float:
        return self._bt.mu

    # -- events --------------------------------------------------------------------------------

    def answer(self, x: Any) -> Answers:
        """Answer queries in order (step 3(d)). Consumes the whole batch unless the round ends
        inside it. In a refusing phase every query is refused (label -1), never answered from data.

        Raises ``InvalidInput`` for a malformed batch and ``InvalidState`` when a transition is
        due; in both cases nothing changed.
        """
        phases.check(self._phase, "answer")
        xs = self.concept.validate_points(x)
        n_in = xs.shape[0]
        if self._phase in phases.REFUSING:
            return self._refusals(n_in)
        spec = self._round.spec
        n = min(n_in, spec.R - self._answered)
        xb = xs[:n]
        q = self._round.ensemble.votes(xb).astype(np.float64) / spec.T
        nu = laplace(self.streams["query_noise"], bt.query_noise_scale(spec.eps_bt, spec.T), n)
        sch = self.schedule
        zeta = xi = mus = None
        if sch.restarts == "private":
            zeta = laplace(self.streams["restart_test"], 4.0 / (spec.restart_eps or 1.0), n)
        if sch.halting == "noisy":
            xi = laplace(self.streams["halt_test"], 4.0 / (spec.halt_eps or 1.0), n)
        if sch.restarts == "stateless":
            mus = laplace(self.streams["threshold_noise"], bt.threshold_noise_scale(spec.eps_bt, spec.T), n)
        res = bt.run(q, nu, band=spec.band, state=self._bt, rules=self._rules(), draw_restart=self._draw_restart,
                     mu_per_query=mus, zeta=zeta, xi=xi)
        self._reservoir.offer(self._answered, xb[: res.answered])
        self._answered += res.answered
        self._bt = res.state
        labels = np.where(res.outcomes == bt.L, 0, 1).astype(np.int8)
        if res.halted:
            self._phase = Phase.HALTED
            rest = n_in - res.answered
            refusals = np.zeros(n_in, np.int8)
            refusals[res.answered:] = Refusal.HALTED
            return Answers(
                labels=np.concatenate([labels, np.full(rest, -1, np.int8)]),
                outcomes=np.concatenate([res.outcomes, np.full(rest, bt.REFUSED, np.int8)]),
                round=self._round.index,
                consumed=n_in,
                refusals=refusals,
            )
        if self._answered == spec.R:
            self._phase = Phase.TRANSITION_DUE
        return Answers(labels=labels, outcomes=res.outcomes, round=self._round.index, consumed=n,
                       refusals=np.zeros(n, np.int8))

    def _refusals(self, n: int) -> Answers:
        code = Refusal.EXHAUSTED if self._phase is Phase.EXHAUSTED else Refusal.HALTED
        return Answers(
            labels=np.full(n, -1, np.int8),
            outcomes=np.full(n, bt.REFUSED, np.int8),
            round=self._round.index,
            consumed=n,
            refusals=np.full(n, code, np.int8),
        )

    def transition(self) -> None:
        """Steps 3(e)-(g) and the start of the next round: LabelBoost on S-hat_i o D-hat_i, draw
        S_{i+1} from the relabeled D-hat_i, refit. CPU-heavy; touches no I/O. Raises
        ``InvalidState`` unless a transition is due."""
        phases.check(self._phase, "transition")
        rnd = self._round
        nxt = self.schedule.spec(rnd.index + 1)
        if nxt is None:
            self._phase = Phase.EXHAUSTED
            return
        g = self.streams["sampling"]
        d_hat = self._reservoir.contents()
        start = self.concept.next_round(rnd.s_hat_x, rnd.s_hat_y, d_hat, nxt.T, nxt.lam, nxt.m_S, g)
        new = Predictor._start_round(self.concept, self.schedule, self.streams, rnd.index + 1, start)
        # adopt the new round in place (the streams object is shared and already advanced)
        self._round = new._round
        self._reservoir = new._reservoir
        self._phase = Phase.ANSWERING
        self._answered = 0
        self._bt = new._bt
        self._mu_units = new._mu_units

    def answer_all(self, x: Any) -> Answers:
        """Convenience for in-process use (simulations, tests): answer a whole sequence, running
        transitions as rounds end. ``round`` of the result is the round of the last query."""
        xs = self.concept.validate_points(x)
        labels: list[NDArray[np.int8]] = []
        outcomes: list[NDArray[np.int8]] = []
        refusals: list[NDArray[np.int8]] = []
        pos = 0
        while True:
            if self._phase is Phase.TRANSITION_DUE:
                self.transition()
            if pos >= xs.shape[0]:
                break
            res = self.answer(xs[pos:])
            labels.append(res.labels)
            outcomes.append(res.outcomes)
            refusals.append(res.refusals)
            pos += res.consumed
        empty = np.zeros(0, np.int8)
        return Answers(
            labels=np.concatenate(labels) if labels else empty,
            outcomes=np.concatenate(outcomes) if outcomes else empty,
            round=self._round.index,
            consumed=pos,
            refusals=np.concatenate(refusals) if refusals else empty,
        )

    # -- state -----------------------------------------------------------------------------------

    def round_state(self) -> dict[str, Any]:
        """What is fixed for the round (classifiers, S-hat, reservoir positions): large, changes
        only at a transition."""
        r = self._round
        return {
            "index": r.index,
            "ensemble": r.ensemble.to_arrays(),
            "s_hat_x": r.s_hat_x,
            "s_hat_y": r.s_hat_y,
            "reservoir_positions": self._reservoir.positions,
        }

    @property
    def reservoir_filled(self) -> int:
        """Queries of the round kept for D-hat so far (append-only within a round)."""
        return self._reservoir.filled

    def reservoir_points(self, start: int, end: int) -> NDArray[np.float64]:
        """D-hat points [start, end) in arrival order: what an incremental checkpoint appends."""
        return self._reservoir.contents()[start:end].copy()

    def live_state(self, include_reservoir: bool = True) -> dict[str, Any]:
        """What changes with every query: counters, threshold noise, random streams and (unless
        ``include_reservoir`` is false) the reservoir points collected so far."""
        st: dict[str, Any] = {
            "round": self._round.index,
            "phase": self._phase.value,
            "answered": self._answered,
            "tops": self._bt.tops,
            "mu": self._bt.mu,
            "rho_r": self._bt.rho_r,
            "block_tops": self._bt.block_tops,
            "rho_h": self._bt.rho_h,
            "mu_units": self._mu_units,
            "streams": self.streams.state(),
            "reservoir_filled": self._reservoir.filled,
        }
        if include_reservoir:
            st["reservoir_points"] = self._reservoir.contents()
        return st

    def state(self) -> dict[str, Any]:
        """The whole predictor as plain values and numpy arrays (see ``engine.codec`` for bytes).
        Holds secrets (data and RNG state): store it like a key."""
        return {**self.round_part(), "live": self.live_state()}

    def round_part(self) -> dict[str, Any]:
        """The checkpoint part fixed for the round (``engine.serving``): large, new at each transition."""
        return {
            "format": FORMAT,
            "concept": self.concept.to_spec(),
            "schedule": self.schedule.to_dict(),
            "round_state": self.round_state(),
        }

    def live_part(self) -> dict[str, Any]:
        """The checkpoint part that changes with every query, without the reservoir's points
        (``reservoir_points`` appends those)."""
        return self.live_state(include_reservoir=False)

    @classmethod
    def from_parts(cls, round_part: dict[str, Any], live_part: dict[str, Any],
                   reservoir: NDArray[np.float64] | None) -> Predictor:
        """Inverse of (``round_part``, ``live_part``, ``reservoir_points(0, reservoir_filled)``)."""
        pts = np.zeros(0) if reservoir is None else reservoir
        try:
            live = {**live_part, "reservoir_points": pts}
            return cls.from_state({**round_part, "live": live})
        except TypeError as exc:
            raise CorruptState(f"state is malformed ({type(exc).__name__})") from None

    @classmethod
    def from_state(cls, st: dict[str, Any]) -> Predictor:
        """Rebuild a predictor whose future answers equal the saved one's. Raises ``CorruptState``."""
        try:
            if st["format"] != FORMAT:
                raise CorruptState("state was written by an incompatible engine version")
            concept = from_spec(st["concept"])
            schedule = Schedule.from_dict(st["schedule"])
            rs, live = st["round_state"], st["live"]
            if int(rs["index"]) != int(live["round"]):
                raise CorruptState("round state and live state belong to different rounds")
            index = int(rs["index"])
            spec = schedule.spec(index)
            if spec is None:
                raise CorruptState("state's round lies beyond its schedule")
            ensemble = concept.ensemble_from_arrays(dict(rs["ensemble"]))
            positions = np.asarray(rs["reservoir_positions"], dtype=np.int64)
            points = np.asarray(live["reservoir_points"], dtype=np.float64)
            if points.shape[0] != int(live.get("reservoir_filled", points.shape[0])):
                raise CorruptState("reservoir points do not match the recorded count")
            reservoir = Reservoir.from_dict(
                {"positions": positions, "points": points, "filled": points.shape[0]}, concept.point_dim
            )
            rnd = _Round(
                index, spec, ensemble,
                np.asarray(rs["s_hat_x"], dtype=np.float64), np.asarray(rs["s_hat_y"], dtype=np.int8),
            )
            pred = cls(
                concept, schedule, Streams.from_state(dict(live["streams"])), rnd, reservoir,
                phase=Phase(live["phase"]), answered=int(live["answered"]),
                bt_state=bt.BTState(mu=float(live["mu"]), rho_r=float(live["rho_r"]),
                                    block_tops=int(live["block_tops"]), tops=int(live["tops"]),
                                    rho_h=float(live["rho_h"])),
                mu_units=np.asarray(live["mu_units"], dtype=np.float64),
            )
        except CorruptState:
            raise
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise CorruptState(f"state is malformed ({type(exc).__name__})") from None
        if ensemble.size != spec.T or not 0 <= pred._answered <= spec.R or not 0 <= pred._bt.tops <= spec.c:
            raise CorruptState("state's counters do not fit its schedule")
        return pred
