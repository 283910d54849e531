"""Every decision of the partition processor, without a broker (milliseconds each): skipping below a
checkpoint, parking during a transition, the cut at a round's end with two models on one partition,
a replaced log (by high watermark and by fingerprint), suspension, the wrong partition, malformed
records, and that every record with an id gets exactly one label record."""

from __future__ import annotations

import msgpack

from everlast.daemon import wire
from everlast.daemon.partition import LOG_DELETED_REASON, LOG_LOST_REASON, PartitionProcessor, Status, fingerprint
from everlast.engine.serving import Refusal
from tests.daemon.fakes import FakeEngine, Rec, decode, feed, labels_of, queries, served


def proc_of(*models: object, known: tuple[str, ...] = (), start: int = 0) -> PartitionProcessor:
    ms = list(models)
    return PartitionProcessor(0, ms, {m.id for m in ms} | set(known), start)  # type: ignore[attr-defined]


def test_every_query_gets_one_label_in_order_and_the_offset_advances() -> None:
    eng = FakeEngine(R=1000)
    p = proc_of(served("m", eng))
    step = feed(p, queries("m", [0.2, 0.7, 0.9], 0))
    labs = labels_of(step)
    assert [(d["id"], d["status"], d["round"]) for d in labs] == [(0, "ok", 1), (1, "ok", 1), (2, "ok", 1)]
    assert step.counts == {("m", "ok"): 3} and step.answered == 3
    assert list(step.labels) == [b"m"]
    assert p.next_offset == 3 and p.models["m"].offset == 3 and p.last_fp is not None
    assert eng.calls == [3]  # one engine call per model and batch


def test_records_below_the_next_offset_are_dropped_and_a_model_ahead_skips_to_its_checkpoint() -> None:
    a, b = FakeEngine(R=1000), FakeEngine(R=1000)
    p = proc_of(served("a", a, offset=5), served("b", b, offset=8))
    assert p.next_offset == 5
    recs = [r for i in range(0, 12) for r in queries("a" if i % 2 else "b", [0.6], i)]
    step = feed(p, recs)
    got = sorted(d["id"] for d in labels_of(step))
    # offsets 0-4 were processed by every model; b's records below 8 were answered before its checkpoint
    assert got == [5, 7, 8, 9, 10, 11]
    assert a.total == 4 and b.total == 2  # a: 5,7,9,11; b: 8,10
    step = feed(p, recs[10:])  # a re-delivery (the same records): nothing twice
    assert step.labels == {} and not step.log_reset and a.total == 4


def test_park_during_a_transition_then_resume() -> None:
    eng = FakeEngine(R=4)
    p = proc_of(served("m", eng))
    step = feed(p, queries("m", [0.9] * 6, 0))
    assert [d["id"] for d in labels_of(step)] == [0, 1, 2, 3]
    assert step.pause and step.transitions == ["m"] and p.status is Status.TRANSITIONING
    assert p.next_offset == 4
    later = feed(p, queries("m", [0.9] * 3, 6))  # arrives while paused: parked, not answered
    assert later.labels == {} and not later.transitions
    eng.transition()
    events = p.transition_done({})
    assert [e.kind for e in events] == ["round"] and p.status is Status.ACTIVE
    step = p.resume()
    labs = labels_of(step)
    assert [(d["id"], d["round"]) for d in labs] == [(4, 2), (5, 2), (6, 2), (7, 2)]
    assert step.transitions == ["m"] and not step.resume  # the round of 4 ended again inside the parked records
    eng.transition()
    p.transition_done({})
    step = p.resume()
    assert [(d["id"], d["round"]) for d in labels_of(step)] == [(8, 3)] and step.resume


def test_the_cut_with_two_models_on_one_partition_is_at_the_first_round_end() -> None:
    a, b = FakeEngine(R=3), FakeEngine(R=100)
    p = proc_of(served("a", a), served("b", b))
    recs = []
    for i in range(10):  # a b a b ...
        recs += queries("a" if i % 2 == 0 else "b", [0.8], i)
    step = feed(p, recs)
    # a's 4th query is at offset 6: everything before it is answered (both models), nothing after
    assert sorted(d["id"] for d in labels_of(step)) == [0, 1, 2, 3, 4, 5]
    assert step.transitions == ["a"] and step.pause and p.next_offset == 6
    assert b.total == 3  # b's queries after the cut wait for a's transition: order per partition holds
    a.transition()
    p.transition_done({})
    step = p.resume()
    assert sorted(d["id"] for d in labels_of(step)) == [6, 7, 8, 9] and step.resume


def test_a_log_replaced_below_the_next_offset_is_detected_from_the_high_watermark_alone() -> None:
    good, lagging = FakeEngine(R=1000), FakeEngine(R=1000)
    # "good" was restored from a hand-over checkpoint (verified); "lagging" from a periodic one
    p = proc_of(served("good", good, offset=2002), served("lag", lagging, offset=2002, verified=False))
    step = p.feed(None, 10)  # the first fetch response: no record at 2001, high watermark 10
    assert step.log_reset and step.seek == 0 and p.next_offset == 0
    assert [e.kind for e in step.events] == ["log_replaced", "suspended"]
    assert p.models["lag"].suspension is not None and p.models["good"].suspension is None
    recs = queries("good", [0.9, 0.1], 0) + queries("lag", [0.9], 2)
    labs = sorted(labels_of(feed(p, recs, hw=10)), key=lambda d: d["id"])
    assert [(d["id"], d["status"]) for d in labs] == [(0, "ok"), (1, "ok"), (2, "refused")]
    assert labs[2]["reason"] == LOG_LOST_REASON and lagging.calls == []


def test_a_log_replaced_above_the_next_offset_is_detected_by_fingerprint() -> None:
    old = queries("m", [0.5] * 4, 0)
    fp = fingerprint(old[3])
    p = proc_of(served("m", FakeEngine(), offset=4, last_fp=fp))
    assert p.start_position == 3  # re-read the last processed record to prove the log is the same
    same = feed(p, old[3:] + queries("m", [0.9], 4))
    assert not same.log_reset and [d["id"] for d in labels_of(same)] == [4]
    p = proc_of(served("m", FakeEngine(), offset=4, last_fp=fp, verified=False))
    other = queries("m", [0.7] * 6, 0, id0=100)  # another log, already longer than 4
    step = feed(p, other[3:])
    assert step.log_reset and step.seek == 0 and step.labels == {}
    assert p.models["m"].suspension is not None  # restored from a periodic checkpoint: cannot replay
    labs = labels_of(feed(p, other))
    assert {d["status"] for d in labs} == {"refused"} and len(labs) == 6


def test_after_a_broker_outage_a_log_that_outgrew_the_old_one_is_re_read_not_continued() -> None:
    """The broker restarted empty while the partition ran and its new log is already longer than the
    old one: ``recheck`` (after the outage) seeks one record back, whose fingerprint proves it is
    another log. Without it the fetch at the old next offset reads as the old log's continuation: the
    new log's first records are never answered (the mutant below)."""
    old, new = queries("m", [0.5] * 4, 0), queries("m", [0.7] * 8, 0, id0=100)
    p = proc_of(served("m", FakeEngine(R=1000)))
    feed(p, old)
    assert p.recheck() == 3
    step = feed(p, new[3:])
    assert step.log_reset and step.seek == 0 and step.labels == {}
    assert p.models["m"].suspension is None  # its running state holds every answer it published
    assert sorted(d["id"] for d in labels_of(feed(p, new))) == list(range(100, 108))
    q = proc_of(served("m", FakeEngine(R=1000)))  # the mutant: no check after the outage
    feed(q, old)
    assert sorted(d["id"] for d in labels_of(feed(q, new[4:]))) == list(range(104, 108))


def test_a_position_that_went_back_is_checked_against_the_last_processed_record() -> None:
    """The consumer's position went back (reset to the log's start after an out-of-range fetch) while
    the high watermark already reaches the next offset: the re-read record at the next offset - 1
    tells a re-delivery (dropped) from another log (re-read from 0, as any replaced log)."""
    old = queries("m", [0.5] * 4, 0)
    p = proc_of(served("m", FakeEngine(R=1000)))
    feed(p, old)
    again = feed(p, old, hw=9)
    assert not again.log_reset and again.labels == {} and p.next_offset == 4
    step = feed(p, queries("m", [0.7] * 4, 0, id0=100), hw=9)  # another log, from its start
    assert step.log_reset and step.seek == 0 and step.labels == {}
    assert p.models["m"].suspension is None and p.next_offset == 0  # exact: it re-reads the new log


def test_an_engine_error_suspends_the_model_and_every_query_gets_a_refusal_naming_it() -> None:
    eng = FakeEngine()
    p = proc_of(served("m", eng))
    feed(p, queries("m", [0.9], 0))
    eng.fail = True
    step = feed(p, queries("m", [0.9, 0.1], 1))
    labs = labels_of(step)
    assert [(d["id"], d["status"]) for d in labs] == [(1, "refused"), (2, "refused")]
    assert "engine failed (InvalidState)" in labs[0]["reason"] and labs[0]["round"] == 1
    assert [e.kind for e in step.events] == ["suspended"]
    s = p.models["m"].suspension
    assert s is not None and s.engine_failed and s.from_offset == 1 and p.models["m"].broken
    calls = len(eng.calls)
    eng.fail = False
    labs = labels_of(feed(p, queries("m", [0.9], 3)))  # never asked again
    assert labs[0]["status"] == "refused" and len(eng.calls) == calls
    assert s.to_meta()["suspended"] == labs[0]["reason"]


def test_a_failed_transition_suspends_the_model() -> None:
    eng = FakeEngine(R=2)
    p = proc_of(served("m", eng))
    step = feed(p, queries("m", [0.9] * 3, 0))
    assert step.transitions == ["m"]
    events = p.transition_done({"m": RuntimeError("boom")})
    assert [e.kind for e in events] == ["suspended"]
    labs = labels_of(p.resume())
    assert labs[0]["id"] == 2 and labs[0]["status"] == "refused" and "RuntimeError" in labs[0]["reason"]


def test_refusals_carry_the_engines_reason_and_a_halt_is_reported_once() -> None:
    eng = FakeEngine(R=100, halt_after=2)
    p = proc_of(served("m", eng))
    step = feed(p, queries("m", [0.9] * 4, 0))
    labs = labels_of(step)
    assert [d["status"] for d in labs] == ["ok", "ok", "refused", "refused"]
    assert labs[2]["reason"] == Refusal.HALTED.reason and labs[2]["label"] is None
    assert [e.kind for e in step.events] == ["halted"] and step.counts == {("m", "ok"): 2, ("m", "refused"): 2}
    step = feed(p, queries("m", [0.9], 4))
    assert step.events == [] and labels_of(step)[0]["status"] == "refused"


def test_wrong_partition_unknown_model_and_malformed_records_get_invalid_labels_and_dead_letters() -> None:
    p = proc_of(served("m", FakeEngine()), known=("elsewhere",))
    recs = [
        *queries("elsewhere", [0.5], 0),
        *queries("nobody", [0.5], 1),
        Rec(2, b"m", msgpack.packb({"id": "d", "x": [0.1, 0.2]})),
        Rec(3, b"m", b"\xc1"),
        Rec(4, b"m", msgpack.packb({"id": "nf", "x": float("nan")})),
        *queries("m", [0.9], 5),
        Rec(6, b"m", msgpack.packb({"id": "big", "x": 0.5, "client": "c" * 200})),
    ]
    step = p.feed(decode(recs, max_bytes=100), 7)
    labs = {d["id"]: d for d in labels_of(step)}
    assert labs[0]["status"] == "invalid" and labs[0]["reason"] == wire.MSG_WRONG_PARTITION
    assert labs[1]["reason"] == wire.MSG_UNKNOWN_MODEL
    assert labs["d"]["reason"] == wire.msg_dimension(1) and labs["nf"]["reason"] == wire.MSG_NON_FINITE
    assert labs["big"]["reason"] == wire.msg_oversized(100) and labs[5]["status"] == "ok"
    assert len(step.label_records()) == 6  # the undecodable record has no id: a dead letter only
    codes = sorted(dict(h)["everlast-error"].decode() for _, _, h in step.dead_letters)
    assert codes == ["dimension", "non_finite", "oversized", "undecodable", "unknown_model", "wrong_partition"]
    assert step.invalid == {c: 1 for c in codes}
    assert step.counts == {("elsewhere", "invalid"): 1, ("m", "invalid"): 3, ("m", "ok"): 1}  # never "nobody"
    assert p.next_offset == 7


def test_points_outside_the_models_domain_are_invalid_and_the_rest_answered() -> None:
    eng = FakeEngine()
    p = proc_of(served("m", eng))
    labs = labels_of(feed(p, queries("m", [0.9, -1.0, 0.2], 0)))
    assert [(d["id"], d["status"]) for d in labs] == [(0, "ok"), (1, "invalid"), (2, "ok")]
    assert labs[1]["reason"] == wire.MSG_DOMAIN and eng.total == 2


def test_json_queries_get_json_labels() -> None:
    p = proc_of(served("m", FakeEngine()))
    step = feed(p, queries("m", [0.9], 0) + queries("m", [0.1], 1, json_=True))
    recs = step.label_records()
    assert [h for _, _, h in recs] == [[], [("content-type", b"application/json")]]
    assert recs[1][1] == b'{"id":1,"label":0,"status":"ok","round":1}'


def test_calls_out_of_turn_raise() -> None:
    import pytest

    from everlast.daemon.errors import OutOfTurn
    from tests.daemon.fakes import decode as batch_of

    eng = FakeEngine(R=2)
    p = proc_of(served("m", eng))
    with pytest.raises(OutOfTurn, match="transition_done while active"):
        p.transition_done({})
    feed(p, queries("m", [0.9] * 3, 0))  # the round ends after two: transitioning
    with pytest.raises(OutOfTurn, match="resume while transitioning"):
        p.resume()
    with pytest.raises(OutOfTurn, match="replay while transitioning"):
        p.replay(batch_of(queries("m", [0.9], 3)))
    p.revoke()
    with pytest.raises(OutOfTurn, match="feed after revoke"):
        feed(p, queries("m", [0.9], 0))
    with pytest.raises(OutOfTurn, match="recheck after revoke"):
        p.recheck()
    assert p.status is Status.REVOKED


def test_a_partition_without_models_rejects_and_advances_from_the_committed_offset() -> None:
    p = proc_of(known=("m",), start=40)
    assert p.next_offset == 40
    step = feed(p, queries("m", [0.9], 40))
    assert labels_of(step)[0]["reason"] == wire.MSG_WRONG_PARTITION and p.next_offset == 41


def test_the_fake_engine_is_a_servable() -> None:
    """(Its behaviour: tests/daemon/test_servable_contract.py, with the real mechanisms.)"""
    from everlast.engine.serving import Servable

    assert isinstance(FakeEngine(), Servable)  # the fake keeps to the protocol the daemon serves


# -- the journal, a learner and a deleted log ------------------------------------------------


class FakeLearner(FakeEngine):
    """Answers are a fixed function of the query (no query state), like the private learner."""

    answers_change_state = False


def test_a_learner_is_never_suspended_for_a_lost_log() -> None:
    p = proc_of(served("l", FakeLearner(), offset=2002, verified=False),
                served("g", FakeEngine(), offset=2002, verified=False))
    step = p.feed(None, 10)
    assert step.log_reset and [(e.kind, e.model) for e in step.events] == [("log_replaced", None), ("suspended", "g")]
    assert p.models["l"].suspension is None
    labs = labels_of(feed(p, queries("l", [0.9], 0) + queries("g", [0.9], 1), hw=10))
    assert [(d["id"], d["status"]) for d in labs] == [(0, "ok"), (1, "refused")]


def test_the_journal_plan_replays_the_rows_after_every_checkpoint_and_makes_the_models_exact() -> None:
    p = proc_of(served("a", FakeEngine(), offset=10, verified=False, journal_seq=4),
                served("b", FakeEngine(), offset=12, verified=False, journal_seq=5))
    # rows 1-4: before a's checkpoint; 5: covered by b's only; 6 straddles a checkpoint taken mid-row
    rows = [(3, 0, 5), (4, 5, 10), (5, 10, 12), (6, 11, 15), (7, 15, 18)]
    seqs, why = p.journal_plan(rows)
    assert why is None and seqs == [5, 6, 7]
    step = p.replay(decode(queries("a", [0.9, 0.1], 10) + queries("b", [0.9, 0.2], 12)))
    assert [d["id"] for d in labels_of(step)] == [10, 11, 12, 13] and p.next_offset == 14
    step = p.replay(decode(queries("b", [0.5] * 4, 14)))
    assert [d["id"] for d in labels_of(step)] == [14, 15, 16, 17]
    p.replayed()  # every row of the plan: exact (the service still compares them with the published marks)
    assert all(m.verified for m in p.models.values())
    assert p.start_position == 17  # the first fetch checks the log against the journal's last record
    step = p.feed(None, 5)  # the log ends before the journal: another (emptier) log; the models stay exact
    assert step.log_reset and [e.kind for e in step.events] == ["log_replaced"]


def test_the_journal_plan_refuses_rows_it_cannot_trust() -> None:
    def proc(seq: int | None) -> PartitionProcessor:
        return proc_of(served("a", FakeEngine(), offset=10, verified=False, journal_seq=seq))

    p = proc(None)  # a checkpoint written beside another journal (or before this one existed)
    assert p.journal_plan([(5, 10, 12)]) == ([], "the checkpoint of model a was not written beside this journal")
    assert not p.models["a"].verified
    p = proc(4)
    seqs, why = p.journal_plan([(5, 11, 12)])  # offset 10 is missing
    assert seqs == [] and why is not None and "does not reach back to offset 10" in why and not p.models["a"].verified
    p = proc(4)
    assert p.journal_plan([]) == ([], None) and p.models["a"].verified  # nothing was processed since the checkpoint


def test_records_deleted_before_they_were_read_suspend_only_a_model_that_cannot_replay() -> None:
    p = proc_of(served("g", FakeEngine(), offset=100, verified=False),
                served("l", FakeLearner(), offset=100, verified=False),
                served("h", FakeEngine(), offset=100, verified=True))
    step = p.feed(None, 500, log_start=300)  # retention deleted offsets 100-299
    assert step.seek == 300 and p.next_offset == 300 and not step.log_reset
    assert [(e.kind, e.model) for e in step.events] == [("log_deleted", None), ("suspended", "g")]
    assert p.models["g"].suspension is not None and p.models["g"].suspension.reason == LOG_DELETED_REASON
    assert p.models["l"].suspension is None and p.models["h"].suspension is None
    labs = labels_of(feed(p, queries("h", [0.9], 300) + queries("g", [0.9], 301), hw=500))
    assert [(d["id"], d["status"]) for d in labs] == [(300, "ok"), (301, "refused")]


def test_a_checkpoint_at_offset_0_still_sees_a_replaced_log_by_how_far_it_reached() -> None:
    p = proc_of(served("g", FakeEngine(), offset=0, verified=False, log_end=3_000))
    step = p.feed(None, 10)  # a fresh log of 10 records; the old one had reached 3,000
    assert step.log_reset and [e.kind for e in step.events] == ["log_replaced", "suspended"]


def test_processed_records_are_reported_for_the_journal_in_slices() -> None:
    p = proc_of(served("m", FakeEngine(R=3)))
    recs = queries("m", [0.9] * 5, 0)
    step = feed(p, recs)
    assert [(a, b, [r.offset for r in rs]) for a, b, rs in step.processed] == [(0, 3, [0, 1, 2])]  # up to the cut
    p.models["m"].engine.transition()
    p.transition_done({})
    step = p.resume()
    assert [(a, b, [r.offset for r in rs]) for a, b, rs in step.processed] == [(3, 5, [3, 4])]


def test_a_pause_is_one_event_also_when_its_round_ends_in_the_same_call() -> None:
    """A round that pauses and reaches its R-th position in one engine call is never seen in phase
    paused (the engine goes answering -> transition due): the engine's ``Answers.paused`` reports it,
    so the paused event (and ``everlast_rounds_paused_total``) counts every pause exactly once. The
    old check (phase before vs after the call) counted none here."""
    from everlast.daemon.events import EventKind
    from everlast.engine.phases import Phase
    from tests.engine.helpers import tops_predictor

    for split in (False, True):
        eng = tops_predictor("target-charged", halt_threshold=4, c=10)
        R = eng.spec.R
        p = proc_of(served("m", eng))
        if split:  # the pause in one call, the round's end in a later one: still one event
            steps = [feed(p, queries("m", [0.5] * 10, 0)), feed(p, queries("m", [0.5] * (R - 10), 10))]
        else:
            steps = [feed(p, queries("m", [0.5] * R, 0))]
        assert eng.phase is Phase.TRANSITION_DUE
        kinds = [e.kind for s in steps for e in s.events]
        assert kinds.count(EventKind.PAUSED) == 1, kinds
        assert sum(s.paused_refused.get("m", 0) for s in steps) == R - 4
