"""GenericBBL (paper, section 5) as a sans-IO state machine.

Feed it query arrays with ``answer``; when a round's R_i queries are answered it asks for
``transition`` (LabelBoost and refitting, a separate step so the daemon can run it off its event
loop). Answers are a function of (state, query sequence) only: every random draw comes from a
stream of one (round, purpose) (``engine.design.generator``), consumed in canonical blocks
(``engine.noise``), so any split of a sequence into batches, and any save/restore in between, gives
identical answers.

Round i (step 3):
  (a, b) S_i is cut into T_i chunks of lambda_i; one ERM classifier per chunk (``ConceptClass.fit``).
  (c, d) each query's vote count goes through the design's mechanism (``engine.between_thresholds``
         on integer counts with exact discrete noise; ``engine.design``): label 0 on L, 1 on R or top;
         when the round's halting test fires the round *pauses*: every later query of the round is
         refused (``Refusal.ROUND_PAUSED``) but still takes its position and fills D-hat, and at the
         round's R_i-th position the round transitions as any other (docs/privacy/genericbbl.md 16).
  (e, f) D-hat_i (m_D of the round's queries, reservoir) and S-hat_i (m_S points of S_i) go to
         LabelBoost; S_{i+1} is a random subset of lambda_{i+1} T_{i+1} of the relabeled D-hat_i.
Round 1 takes S_1, a random subset of lambda_1 T_1 points of the training set (step 2); the
training set itself is not kept.

**Failures change nothing.** ``answer`` and ``transition`` compute into new values and commit them
with plain assignments at the end: any exception (``MemoryError`` included) leaves the predictor
byte-identical. If a commit ever left the state inconsistent (an invariant check fails), the
predictor enters phase ERROR, in which every call raises ``InvalidState`` naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from everlast.engine import between_thresholds as bt
from everlast.engine import burn as burns
from everlast.engine import clients as cl
from everlast.engine import overlap, phases
from everlast.engine import quotas as qt
from everlast.engine.concepts import ConceptClass, Ensemble, from_spec
from everlast.engine.concepts.base import RoundStart, check_labels
from everlast.engine.concepts.random_order import OrderSource, PreparedOrder
from everlast.engine.design import (
    Design,
    NoisePlan,
    Purpose,
    RoundNoise,
    client_generator,
    generator,
    noise_plan,
    query_block,
)
from everlast.engine.errors import CorruptState, InvalidInput, InvalidSchedule, InvalidState, TrainingSetTooSmall
from everlast.engine.noise import NoiseStream, sample
from everlast.engine.phases import Phase
from everlast.engine.reservoir import Reservoir
from everlast.engine.rng import root_entropy
from everlast.engine.schedule import RoundSpec, Schedule
from everlast.engine.serving import Answers, Refusal, RoundInfo

FORMAT = "everlast-engine/5"
"""/5: S_{i+1}'s order at a transition comes from its own stream (``Purpose.ORDER``), so a /4 state
would transition differently and is refused. /4: exact discrete noise on integer counts, one stream
per (round, purpose), the target-charged design; a /3 state ran a different mechanism."""
FORMAT_CLIENTS = "everlast-engine/6"
"""The tag of a state whose schedule runs per-client quotas or the burn-rate signal (``Schedule.clients``):
/5 plus the quota and burn parts of the live state. A state without them is still written as /5, byte
for byte as before they existed; an engine that knows only /5 refuses a /6 state instead of silently
running it without its quotas."""


@dataclass(frozen=True, slots=True)
class _Round:
    """Everything that is fixed for the duration of a round (written once per round)."""

    index: int
    spec: RoundSpec
    plan: NoisePlan
    ensemble: Ensemble
    s_hat_x: NDArray[np.float64]
    s_hat_y: NDArray[np.int8]
    positions: NDArray[np.int64] | None
    """The round positions whose queries D-hat keeps (engine.reservoir); None: every query (m_D = R)."""
    quota: qt.QuotaPlan | None = None
    """The round's per-client quota test (``engine.quotas``), when the schedule has quotas."""

    @property
    def kept(self) -> int:
        return self.spec.R if self.positions is None else self.positions.size


@dataclass(frozen=True, slots=True)
class _Live:
    """What changes with every query (committed by one assignment)."""

    phase: Phase
    answered: int
    bt: bt.BTState
    noise: RoundNoise
    filled: int
    """Reservoir points collected (rows >= filled of the points array are scratch)."""
    quota: qt.QuotaState | None = None
    """The round's client table and quota noise (``Schedule.quotas``; None when off)."""
    burn: burns.BurnState | None = None
    """The burn-rate signal's window count and noise (``Schedule.burn``; None when off)."""


PREPARE_AHEAD = 8
"""S_{i+1}'s order is begun by the batch that reaches the last 1/8 of a round (``Predictor.answer``):
early enough that a daemon's small batches cover it, late enough that its arrays (8 bytes per D-hat
point while it runs, 4 after -- 8 when the next round's T * lambda exceeds 2^22, a view of the keys:
``random_order.CONTIGUOUS_MAX`` -- next to D-hat's own 8 d) are held for a fraction of the round."""


class Predictor:
    """The GenericBBL private everlasting predictor. Build with ``create`` or ``from_state``."""

    __slots__ = ("_live", "_points", "_prepared", "_round", "concept", "entropy", "schedule")

    mechanism = "generic-bbl"
    has_rounds = True
    answers_change_state = True

    def __init__(self, concept: ConceptClass, schedule: Schedule, entropy: int, rnd: _Round,
                 points: NDArray[np.float64], live: _Live) -> None:
        self.concept = concept
        self.schedule = schedule
        self.entropy = entropy  # the root of every stream: a secret
        self._round = rnd
        self._points = points
        self._live = live
        self._prepared: tuple[int, PreparedOrder] | None = None
        """S_{i+1}'s order for round i + 1, begun in round i's last eighth (not state: a cache of
        a pure function of the state, dropped by a checkpoint and recomputed the same)."""

    def __getstate__(self) -> dict[str, Any]:
        """``copy.deepcopy`` and ``pickle``: every slot but the prepared order (a cache, not state).
        A shallow copy would share the reservoir's array, which answering writes in place."""
        return {k: getattr(self, k) for k in self.__slots__ if k != "_prepared"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            setattr(self, k, v)
        self._prepared = None

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def create(cls, concept: ConceptClass, schedule: Schedule, x: Any, y: Any, seed: int | None = None) -> Predictor:
        """Step 2: draw S_1 from the training set (x, y) and start round 1.

        Raises ``InvalidInput`` (empty, NaN/inf, wrong dimension or type, labels not in {0,1}) or
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
        entropy = root_entropy(seed)
        g = generator(entropy, 1, Purpose.SAMPLING)
        pick = g.choice(n, size=need, replace=False)
        first = schedule.rounds[0]
        start = concept.start_round(xs[pick], ys[pick], first.T, first.lam, first.m_S, g)
        rnd, points, live = _start_round(concept, schedule, entropy, 1, start, g)
        return cls(concept, schedule, entropy, rnd, points, live)

    # -- observation ---------------------------------------------------------------------------

    @property
    def design(self) -> Design:
        return self.schedule.design

    @property
    def point_dim(self) -> int:
        return self.concept.point_dim

    @property
    def phase(self) -> Phase:
        return self._live.phase

    @property
    def capacity(self) -> int | None:
        """Queries ``answer`` will consume before a transition is due: 0 when one is due (call
        ``transition``), ``None`` when refusing (every query is consumed, refused)."""
        ph = self._live.phase
        if ph is Phase.TRANSITION_DUE or ph is Phase.ERROR:
            return 0
        if ph in phases.REFUSING:
            return None
        return self._round.spec.R - self._live.answered

    @property
    def round(self) -> int:
        return self._round.index

    @property
    def spec(self) -> RoundSpec:
        return self._round.spec

    @property
    def plan(self) -> NoisePlan:
        """The exact integers and noise scales of the current round (``engine.design.noise_plan``)."""
        return self._round.plan

    @property
    def answered_in_round(self) -> int:
        """Queries the round has taken (its position): answered, or refused for a client quota."""
        return self._live.answered

    @property
    def tops_in_round(self) -> int:
        """Tops used in the current round. Private in the queries (it moves with any one query's
        outcome): do not publish it while the round runs (see docs/PRIVACY.md)."""
        return self._live.bt.tops

    def round_info(self) -> RoundInfo:
        spec = self._round.spec
        return RoundInfo(answered=self._live.answered, allowed=spec.R, halt_cap=spec.c, tops=self._live.bt.tops)

    @property
    def ensemble(self) -> Ensemble:
        return self._round.ensemble

    @property
    def threshold_noise(self) -> int:
        """The paper design's threshold noise in force (diagnostics only: a secret)."""
        return self._live.bt.mu

    # -- events --------------------------------------------------------------------------------

    def answer(self, x: Any, clients: cl.ClientIds = None) -> Answers:
        """Answer queries in order (step 3(d)). Consumes the whole batch unless the round ends
        inside it. In a refusing phase every query is refused (label -1), never answered from data; in
        a paused round (phase PAUSED) every query is refused (``Refusal.ROUND_PAUSED``) until the
        round's R_i positions are taken, and is kept for D-hat at its position like any other.

        ``clients``: who sent the queries (``engine.clients``): one id (str or bytes) for the whole
        batch, one per query, or ``None``, the shared anonymous client. Read only when the schedule
        has per-client quotas (``engine.quotas``): a query whose client has spent its share of the round
        is refused with ``Refusal.CLIENT_QUOTA``. A per-query sequence of the wrong length is an error
        either way.

        Raises ``InvalidInput`` for a malformed batch, ``InvalidState`` when a transition is due or
        in phase ERROR; on any exception the predictor is unchanged.
        """
        live = self._live
        phases.check(live.phase, "answer")
        xs = self.concept.validate_points(x)
        n_in = xs.shape[0]
        who = self._clients(clients, n_in)
        if live.phase in phases.REFUSING:
            return self._refusals(n_in, live.phase)
        n = min(n_in, self._round.spec.R - live.answered)
        prepared = self._prepare_order(n)
        try:
            new, out = self._paused(xs, n) if live.phase is Phase.PAUSED else self._answer(xs, n, who)
        except BaseException:
            if prepared is not None:
                prepared.cancel()
            raise
        self._live = new  # commit
        if prepared is not None:
            self._prepared = (self._round.index + 1, prepared)
        if new.phase not in (Phase.ANSWERING, Phase.PAUSED, Phase.TRANSITION_DUE):
            # no transition will take it, and no retry follows (a daemon answers on its event loop:
            # the job ends on its own rather than stall every partition)
            self._drop_prepared(wait_running=False)
        return out

    def _clients(self, clients: Any, n: int) -> cl.ClientBatch | None:
        """The batch's clients when the schedule has quotas (None otherwise: not read, only a
        per-query sequence's length is checked)."""
        if self.schedule.quotas is not None:
            return cl.batch(clients, n)
        if clients is not None and not isinstance(clients, str | bytes):
            try:
                m = len(clients)
            except TypeError:
                raise InvalidInput("clients must be None, one id (str or bytes), or one id per query") from None
            if m != n:
                raise InvalidInput(f"clients has {m} entries for a batch of {n} queries")
        return None

    def _drop_prepared(self, wait_running: bool = True) -> None:
        if self._prepared is not None:
            self._prepared[1].cancel(wait_running)
            self._prepared = None

    def _prepare_order(self, n: int) -> PreparedOrder | None:
        """From the batch that reaches the round's last 1/PREPARE_AHEAD, S_{i+1}'s order, begun
        on a second core (``PreparedOrder``): it needs only D-hat's final size, the next round's
        T * lambda and the ORDER stream, all fixed already, so the transition does not wait for it.
        When to begin depends on public counts only; what it computes, on none of the queries."""
        rnd, live = self._round, self._live
        R = rnd.spec.R
        if n == 0 or self._prepared is not None or live.answered + n < R - R // PREPARE_AHEAD:
            return None
        nxt = self.schedule.spec(rnd.index + 1)
        if nxt is None or nxt.T * nxt.lam > rnd.kept:
            return None
        entropy, index = self.entropy, rnd.index + 1
        return PreparedOrder(rnd.kept, nxt.T * nxt.lam, lambda: generator(entropy, index, Purpose.ORDER))

    def _answer(self, xs: NDArray[Any], n: int, who: cl.ClientBatch | None) -> tuple[_Live, Answers]:
        """``answer``'s work on validated queries, n of them before the round's end: the new live
        state and the answers, nothing committed.

        Target-charged, **constant work** (docs/privacy/genericbbl.md 8): the numpy calls and the
        branches depend on the batch's size, its clients, public counters and on whether (and where)
        the round halted in the batch -- released by the batch's own refusals -- never on the private
        counts (``tests/engine/test_constant_work.py``)."""
        live, rnd, spec = self._live, self._round, self._round.spec
        xb = xs[:n]
        votes = rnd.ensemble.votes(xb)
        a, b, noise = live.noise.per_query(n)
        quota, burn, released = live.quota, live.burn, None
        is_top = fires = np.zeros(0, np.bool_)
        if self.design.target_charged:
            assert b is not None
            out = bt.outcomes_tct(votes, a, rnd.plan)
            refused = None
            if quota is not None:
                assert who is not None and rnd.quota is not None
                xq, qnoise = quota.noise.take(n)
                is_top = out == bt.TOP
                decision = qt.decide(quota.table, who.head(n), is_top, xq, rnd.quota, self._rho_draw())
                refused, fires = decision.refused, decision.fires
                quota = qt.QuotaState(qt.commit(decision, is_top), qnoise)
            res = bt.halt_tct(out, b, rnd.plan, live.bt, refused)
        else:
            assert noise.threshold is not None
            feed = _MuFeed(noise.threshold)
            res = bt.run_paper(votes, a, rnd.plan, live.bt, feed)
            noise = replace(noise, threshold=feed.committed())
        k = res.answered
        if k < n:  # the round paused inside the batch (released by the refusals of the rest of it):
            # the streams and the client table stop at its last answered query
            _, _, cut = live.noise.per_query(k)
            noise = RoundNoise(noise.design, noise.plan, cut.query, noise.threshold, cut.halt_query)
            if quota is not None:
                assert live.quota is not None and who is not None and rnd.quota is not None
                xq, qnoise = live.quota.noise.take(k)
                head = qt.decide(live.quota.table, who.head(k), is_top[:k], xq, rnd.quota, self._rho_draw())
                quota = qt.QuotaState(qt.commit(head, is_top[:k]), qnoise)
                fires = head.fires
        # Every position of the batch up to the round's end is taken, answered or refused (a pause
        # inside the batch refuses the rest of it, n - k queries): D-hat keeps each at its position.
        counted = res.outcomes == bt.TOP
        if k < n:
            counted = np.concatenate([counted, np.zeros(n - k, np.bool_)])
        if burn is not None and self.schedule.burn is not None:
            released, burn = burns.windows(counted, live.answered, burn, self.schedule.burn.window, rnd.index)
        filled = _offer(self._points, rnd.positions, live.filled, live.answered, xb)
        answered = live.answered + n
        outcome = "round_full" if answered == spec.R else "paused" if res.halted else "answered"
        paused = int(res.halted and live.answered + k < spec.R)  # fired with positions left: refused from k on
        new = _Live(phases.fire(live.phase, "answer", outcome), answered, res.state, noise, filled, quota, burn)
        # labels: 0 on L, 1 on R or TOP; -1 where refused for a client quota (outcome REFUSED). The
        # branches below are on the schedule (public) and on whether the round halted in this batch,
        # which the batch's own refusals release.
        outcomes = res.outcomes
        labels = (outcomes != bt.L).view(np.int8)
        extra: dict[str, Any] = {} if released is None else {"burn": released}
        if quota is not None:
            quota_refused = outcomes == bt.REFUSED
            labels = np.where(quota_refused, np.int8(-1), labels)
            refusals = quota_refused.view(np.int8) * np.int8(Refusal.CLIENT_QUOTA)
            extra["quota_fired"] = fires[:k]
        else:
            refusals = np.zeros(k, np.int8)
        if k < n:  # the round paused: the rest of the batch, up to the round's end, is refused
            rest = n - k
            labels = np.concatenate([labels, np.full(rest, -1, np.int8)])
            outcomes = np.concatenate([outcomes, np.full(rest, bt.REFUSED, np.int8)])
            refusals = np.concatenate([refusals, np.full(rest, Refusal.ROUND_PAUSED, np.int8)])
            if quota is not None:
                extra["quota_fired"] = np.concatenate([fires[:k], np.zeros(rest, np.bool_)])
        return new, Answers(labels=labels, outcomes=outcomes, round=rnd.index, consumed=n,
                            refusals=refusals, paused=paused, **extra)

    def _paused(self, xs: NDArray[Any], n: int) -> tuple[_Live, Answers]:
        """A paused round's next n queries (n <= what is left of the round): refused, none answered
        from data, no noise drawn; each takes its position, and D-hat keeps those at its positions,
        exactly as it would keep them unpaused (docs/privacy/genericbbl.md 16: D-hat stays a uniform
        subset of m_D of the round's R_i positions, the rate the query chain charges). The burn-rate
        windows these positions complete are released as usual (no answered top among them)."""
        live, rnd = self._live, self._round
        xb = xs[:n]
        filled = _offer(self._points, rnd.positions, live.filled, live.answered, xb)
        burn, extra = live.burn, dict[str, Any]()
        if burn is not None and self.schedule.burn is not None:
            released, burn = burns.windows(np.zeros(n, np.bool_), live.answered, burn, self.schedule.burn.window,
                                           rnd.index)
            extra["burn"] = released
        if self.schedule.quotas is not None:
            extra["quota_fired"] = np.zeros(n, np.bool_)
        answered = live.answered + n
        phase = phases.fire(live.phase, "answer", "round_full" if answered == rnd.spec.R else "refused")
        new = replace(live, phase=phase, answered=answered, filled=filled, burn=burn)
        return new, Answers(labels=np.full(n, -1, np.int8), outcomes=np.full(n, bt.REFUSED, np.int8),
                            round=rnd.index, consumed=n, refusals=np.full(n, Refusal.ROUND_PAUSED, np.int8),
                            **extra)

    def _rho_draw(self) -> Callable[[NDArray[np.uint64]], NDArray[np.int64]]:
        """rho'_k for new clients of the round (``engine.quotas``): one draw from each client's own
        stream, like rho_h (a block of one from its start)."""
        rnd, entropy = self._round, self.entropy
        assert rnd.quota is not None
        scale, index = rnd.quota.threshold, rnd.index

        def draw(keys: NDArray[np.uint64]) -> NDArray[np.int64]:
            out = np.empty(keys.size, dtype=np.int64)
            for i, key in enumerate(keys.tolist()):  # one step per new client of the round (a public count)
                out[i] = sample(client_generator(entropy, index, Purpose.QUOTA_THRESHOLD, key), scale, 1)[0]
            return out

        return draw

    def _refusals(self, n: int, phase: Phase) -> Answers:
        code = Refusal.EXHAUSTED if phase is Phase.EXHAUSTED else Refusal.HALTED
        fired = np.zeros(n if self.schedule.quotas is not None else 0, np.bool_)
        return Answers(labels=np.full(n, -1, np.int8), outcomes=np.full(n, bt.REFUSED, np.int8),
                       round=self._round.index, consumed=n, refusals=np.full(n, code, np.int8), quota_fired=fired)

    def transition(self) -> None:
        """Steps 3(e)-(g) and the start of the next round: LabelBoost on S-hat_i o D-hat_i, draw
        S_{i+1} from the relabeled D-hat_i, refit. CPU-heavy; touches no I/O. Raises
        ``InvalidState`` unless a transition is due; on any exception the predictor is unchanged."""
        live, rnd = self._live, self._round
        phases.check(live.phase, "transition")
        nxt = self.schedule.spec(rnd.index + 1)
        if nxt is None:
            self._live = replace(live, phase=phases.fire(live.phase, "transition", "ended"))
            self._drop_prepared()
            return
        g = generator(self.entropy, rnd.index + 1, Purpose.SAMPLING)
        d_hat = self._points[: live.filled]
        prepared = self._prepared
        order: OrderSource = (prepared[1] if prepared is not None and prepared[0] == rnd.index + 1
                              else generator(self.entropy, rnd.index + 1, Purpose.ORDER))
        # The next round's noise streams need nothing from the transition: opened on a second core
        # (Python work that fits inside the D-hat sort, which releases the GIL), same bytes inline.
        with overlap.begin(RoundNoise.start, self.schedule.design, noise_plan(self.schedule.design, nxt),
                           self.entropy, rnd.index + 1, work=d_hat.shape[0]) as opening:
            start = self.concept.next_round(rnd.s_hat_x, rnd.s_hat_y, d_hat, nxt.T, nxt.lam, nxt.m_S, g, order)
            opened = opening.result()
        new_round, points, new_live = _start_round(self.concept, self.schedule, self.entropy, rnd.index + 1,
                                                   start, g, opened)
        new_live = replace(new_live, phase=phases.fire(live.phase, "transition", "next"))
        self._round, self._points, self._live = new_round, points, new_live  # commit
        self._prepared = None
        self._check_invariants()

    def _check_invariants(self) -> None:
        live, spec = self._live, self._round.spec
        ok = (self._round.ensemble.size == spec.T and 0 <= live.answered <= spec.R
              and 0 <= live.filled <= self._round.kept)
        if not ok:
            self._live = replace(live, phase=Phase.ERROR)
            raise InvalidState("the predictor's state is inconsistent after a transition; it entered phase error")

    def answer_all(self, x: Any, clients: cl.ClientIds = None) -> Answers:
        """Convenience for in-process use (simulations, tests): answer a whole sequence, running
        transitions as rounds end. ``round`` of the result is the round of the last query; ``burn``
        holds every release, each row naming its round."""
        xs = self.concept.validate_points(x)
        per_query = clients is not None and not isinstance(clients, str | bytes)
        if per_query and len(clients) != xs.shape[0]:  # type: ignore[arg-type]
            raise InvalidInput(f"clients has {len(clients)} entries for {xs.shape[0]} queries")  # type: ignore[arg-type]
        parts: list[Answers] = []
        pos = 0
        while True:
            if self._live.phase is Phase.TRANSITION_DUE:
                self.transition()
            if pos >= xs.shape[0]:
                break
            res = self.answer(xs[pos:], clients[pos:] if per_query else clients)  # type: ignore[index]
            parts.append(res)
            pos += res.consumed
        empty = np.zeros(0, np.int8)

        def cat(name: str) -> NDArray[np.int8]:
            return np.concatenate([getattr(p, name) for p in parts]) if parts else empty

        # the last query's round: a round that ends with the sequence has already transitioned
        last = parts[-1].round if parts else self._round.index
        burn = np.concatenate([p.burn for p in parts]) if parts else np.zeros((0, 3), np.int64)
        fired = np.concatenate([p.quota_fired for p in parts]) if parts else np.zeros(0, np.bool_)
        return Answers(labels=cat("labels"), outcomes=cat("outcomes"), round=last,
                       consumed=pos, refusals=cat("refusals"), burn=burn, quota_fired=fired,
                       paused=sum(p.paused for p in parts))

    # -- state -----------------------------------------------------------------------------------

    @property
    def reservoir_filled(self) -> int:
        """Queries of the round kept for D-hat so far (append-only within a round)."""
        return self._live.filled

    def reservoir_points(self, start: int, end: int) -> NDArray[np.float64]:
        """D-hat points [start, end) in arrival order: what an incremental checkpoint appends."""
        return self._points[start : min(end, self._live.filled)].copy()

    def round_part(self) -> dict[str, Any]:
        """The checkpoint part fixed for the round (``engine.serving``): large, new at each transition."""
        r = self._round
        return {
            "format": FORMAT_CLIENTS if self.schedule.clients else FORMAT,
            "concept": self.concept.to_spec(),
            "schedule": self.schedule.to_dict(),
            "round_state": {
                "index": r.index,
                "ensemble": r.ensemble.to_arrays(),
                "s_hat_x": r.s_hat_x,
                "s_hat_y": r.s_hat_y,
                "reservoir_positions": np.arange(r.spec.R, dtype=np.int64) if r.positions is None else r.positions,
            },
        }

    def live_part(self) -> dict[str, Any]:
        """The checkpoint part that changes with every query (without the reservoir's points:
        ``reservoir_points`` appends those). Holds the root entropy: a secret."""
        live = self._live
        part: dict[str, Any] = {
            "round": self._round.index,
            "phase": live.phase.value,
            "answered": live.answered,
            "tops": live.bt.tops,
            "mu": live.bt.mu,
            "rho_h": live.bt.rho_h,
            "noise": live.noise.to_dict(),
            "entropy": format(self.entropy, "x"),
            "reservoir_filled": live.filled,
        }
        if live.quota is not None:  # only with quotas on: a state without them keeps its bytes
            part["quota"] = live.quota.to_dict()
        if live.burn is not None:
            part["burn"] = live.burn.to_dict()
        return part

    def state(self) -> dict[str, Any]:
        """The whole predictor as plain values and numpy arrays (see ``engine.codec`` for bytes).
        Holds secrets (data and randomness): store it like a key."""
        return {**self.round_part(), "live": {**self.live_part(), "reservoir_points": self.reservoir_points(
            0, self._live.filled)}}

    @classmethod
    def from_parts(cls, round_part: dict[str, Any], live_part: dict[str, Any],
                   reservoir: NDArray[np.float64] | None) -> Predictor:
        """Inverse of (``round_part``, ``live_part``, ``reservoir_points(0, reservoir_filled)``)."""
        pts = np.zeros(0) if reservoir is None else reservoir
        return cls.from_state({**round_part, "live": {**live_part, "reservoir_points": pts}})

    @classmethod
    def from_state(cls, st: dict[str, Any]) -> Predictor:
        """Rebuild a predictor whose future answers equal the saved one's. Raises ``CorruptState``."""
        try:
            if st["format"] not in (FORMAT, FORMAT_CLIENTS):
                raise CorruptState("state was written by an incompatible engine version")
            concept = from_spec(st["concept"])
            schedule = Schedule.from_dict(st["schedule"])
            if st["format"] != (FORMAT_CLIENTS if schedule.clients else FORMAT):
                raise CorruptState("state's format tag does not match its schedule's quotas and burn-rate settings")
            rs, live = st["round_state"], st["live"]
            index = int(rs["index"])
            if index != int(live["round"]):
                raise CorruptState("round state and live state belong to different rounds")
            spec = schedule.spec(index)
            if spec is None:
                raise CorruptState("state's round lies beyond its schedule")
            plan = noise_plan(schedule.design, spec)
            ensemble = concept.ensemble_from_arrays(dict(rs["ensemble"]))
            positions = np.asarray(rs["reservoir_positions"], dtype=np.int64)
            got = np.asarray(live["reservoir_points"], dtype=np.float64)
            filled = int(live["reservoir_filled"])
            shape = (positions.size,) if concept.point_dim == 1 else (positions.size, concept.point_dim)
            if filled != got.shape[0] or filled > positions.size:
                raise CorruptState("reservoir points do not match the recorded count")
            points = np.zeros(shape, dtype=np.float64)
            points[:filled] = got.reshape((filled, *shape[1:]))
            qplan = None if schedule.quotas is None else qt.quota_plan(schedule.quotas, spec)
            rnd = _Round(index, spec, plan, ensemble, np.asarray(rs["s_hat_x"], dtype=np.float64),
                         np.asarray(rs["s_hat_y"], dtype=np.int8), None if positions.size == spec.R else positions,
                         qplan)
            noise = RoundNoise.from_dict(schedule.design, plan, dict(live["noise"]))
            state = bt.BTState(tops=int(live["tops"]), mu=int(live["mu"]), rho_h=int(live["rho_h"]))
            if ("quota" in live) != (qplan is not None) or ("burn" in live) != (schedule.burn is not None):
                raise CorruptState("state's quota or burn part does not match its schedule")
            quota = None if qplan is None else qt.QuotaState.from_dict(live["quota"], qplan, query_block(spec.R))
            burn = None if schedule.burn is None else burns.BurnState.from_dict(live["burn"], schedule.burn)
            new_live = _Live(Phase(live["phase"]), int(live["answered"]), state, noise, filled, quota, burn)
            entropy = int(str(live["entropy"]), 16)
        except CorruptState:
            raise
        except (KeyError, TypeError, ValueError, IndexError, InvalidSchedule) as exc:
            raise CorruptState(f"state is malformed ({type(exc).__name__})") from None
        # the paper's design stops at its c-th top; the target-charged round runs no hard cap (c is what
        # its certificate charges: docs/privacy/genericbbl.md 16), so its count is bounded by the queries
        top_bound = min(new_live.answered, spec.R if schedule.design.target_charged else spec.c)
        if ensemble.size != spec.T or not 0 <= new_live.answered <= spec.R or not 0 <= state.tops <= top_bound:
            raise CorruptState("state's counters do not fit its schedule")
        # What every reachable state satisfies; without these checks such a state was accepted and
        # then failed later (a transition raising a bare ValueError on every retry).
        answered, ph = new_live.answered, new_live.phase
        if (positions.size != spec.m_D or (positions.size and (positions[0] < 0 or positions[-1] >= spec.R))
                or bool(np.any(np.diff(positions) <= 0))
                or filled != int(np.searchsorted(positions, answered))
                or (ph is Phase.ANSWERING and (answered == spec.R or (not schedule.design.target_charged
                                                                      and state.tops >= spec.c)))  # the c-th top pauses
                or (ph is Phase.PAUSED and answered >= spec.R)  # a paused round that is full transitions
                or (ph in (Phase.TRANSITION_DUE, Phase.EXHAUSTED) and answered != spec.R)):
            raise CorruptState("state's reservoir or phase does not fit its counters")
        if quota is not None and int(quota.table.tops.sum()) != state.tops:
            raise CorruptState("state's client tops do not add up to the round's")  # every top has one client
        window = 1 if schedule.burn is None else schedule.burn.window
        if burn is not None and burn.tops > min(state.tops, answered % window):
            raise CorruptState("state's burn-rate window holds more tops than it has queries")
        # LabelBoost and the ERMs take these as validated data (finite points, 0/1 labels); a NaN
        # would break their deduplication (review of exact LabelBoost, N2)
        if (not np.isfinite(points[:filled]).all() or not np.isfinite(rnd.s_hat_x).all()
                or bool(np.any((rnd.s_hat_y != 0) & (rnd.s_hat_y != 1)))):
            raise CorruptState("state's points are not finite or its labels not 0/1")
        return cls(concept, schedule, entropy, rnd, points, new_live)


def _start_round(concept: ConceptClass, schedule: Schedule, entropy: int, index: int, start: RoundStart,
                 g: np.random.Generator, opened: tuple[RoundNoise, int] | None = None,
                 ) -> tuple[_Round, NDArray[np.float64], _Live]:
    """Step 3(c) for round ``index``, whose classifiers and S-hat are ``start``; ``g`` is the round's
    sampling stream (already used for what formed S_index and its classifiers); ``opened``: the
    round's ``RoundNoise.start``, when the caller computed it already."""
    spec = schedule.spec(index)
    if spec is None or start.ensemble.size != spec.T:
        raise InvalidSchedule(f"round {index} cannot be formed from the classifiers given")
    plan = noise_plan(schedule.design, spec)
    reservoir = Reservoir.draw(spec.R, spec.m_D, concept.point_dim, g)
    qplan = None if schedule.quotas is None else qt.quota_plan(schedule.quotas, spec)
    rnd = _Round(index, spec, plan, start.ensemble, start.s_hat_x, start.s_hat_y, reservoir.stored_positions,
                 qplan)
    noise, first = RoundNoise.start(schedule.design, plan, entropy, index) if opened is None else opened
    state = bt.BTState(rho_h=first) if schedule.design.target_charged else bt.BTState(mu=first)
    quota = None if qplan is None else qt.QuotaState(
        qt.ClientTable.empty(),
        NoiseStream.fresh(generator(entropy, index, Purpose.QUOTA_QUERY), qplan.query, query_block(spec.R)))
    burn = None if schedule.burn is None else burns.BurnState(
        0, NoiseStream.fresh(generator(entropy, index, Purpose.BURN), schedule.burn.scale, burns.BLOCK))
    return rnd, reservoir.points, _Live(Phase.ANSWERING, 0, state, noise, 0, quota, burn)


class _MuFeed:
    """The paper design's threshold noises for one batch, pulled from the stream in chunks: called
    (one noise), or peeked at and skipped (``bt.run_paper`` looks ahead); ``committed`` is the
    stream after exactly the ones consumed."""

    __slots__ = ("before", "buf", "pos", "stream")
    CHUNK = 256

    def __init__(self, stream: NoiseStream) -> None:
        self.stream = self.before = stream  # ``before``: the stream at buf[0]
        self.buf, self.pos = np.zeros(0, np.int64), 0

    def _have(self, k: int) -> None:
        """At least k noises pulled past ``pos``."""
        if self.pos + k <= self.buf.size:
            return
        if self.pos == self.buf.size:  # all used: start a fresh buffer where the stream is
            self.before, self.buf, self.pos = self.stream, np.zeros(0, np.int64), 0
        more, self.stream = self.stream.take(max(self.CHUNK, self.pos + k - self.buf.size))
        self.buf = np.concatenate([self.buf, more])

    def __call__(self) -> int:
        self._have(1)
        self.pos += 1
        return int(self.buf[self.pos - 1])

    def peek(self, k: int) -> NDArray[np.int64]:
        """Exactly the next k noises, not consumed."""
        self._have(k)
        return self.buf[self.pos : self.pos + k]

    def skip(self, k: int) -> None:
        self._have(k)
        self.pos += k

    def committed(self) -> NoiseStream:
        return self.stream if self.pos == self.buf.size else self.before.take(self.pos)[1]


def _offer(points: NDArray[np.float64], positions: NDArray[np.int64] | None, filled: int, start: int,
           x: NDArray[np.float64]) -> int:
    """Write the queries at round positions start, start+1, ... that D-hat keeps into rows >= filled
    of ``points`` (scratch until committed) and return the new fill count (``positions`` None: every
    query is kept, and row p holds position p)."""
    if positions is None:
        points[filled : filled + x.shape[0]] = x
        return filled + int(x.shape[0])
    lo = int(np.searchsorted(positions, start, side="left"))
    hi = int(np.searchsorted(positions, start + x.shape[0], side="left"))
    if hi > lo:
        points[filled : filled + hi - lo] = x[positions[lo:hi] - start]
    return filled + max(hi - lo, 0)
