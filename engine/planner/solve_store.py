"""Searched schedules kept between processes: the solver's output, never a claim.

``tight.solve`` (and ``estimate_n``, which ``choose_eps_h`` and ``best_epsilon`` compare) is a pure
function of its arguments and of the code and numerical libraries that compute it; its search takes
seconds, while what the planner *claims* about its output (``chain.certify``, the accuracy checks)
takes a tenth of a second and is always recomputed. So a process may hand the planner a
:class:`Store` (``using``): the planner looks a solve up by a key of its arguments before searching
and stores what it found after. The engine does no I/O: the store is the caller's
(``everlast.daemon.plan_cache`` keeps one on disk), and its ``namespace`` says which code computes
the values (a digest of the engine's sources and the numerical libraries' versions), so that a value
is only reused by the code that would recompute it.

What an entry can and cannot change. It holds a schedule (or the solver's refusal, or a float
estimate): the certificate, the check that n suffices, the accuracy checks and every (epsilon,
delta) printed are derived from that schedule as after a fresh search. A stored schedule is used only
if it decodes into exactly the solver's types and round count, and its certificate meets the targets
(``accept``); anything else is a miss, searched afresh. The search's own notes that travel with a
schedule (the budget split E_1, E_2, the rates, each round's budget and binding constraint) are shown
as the search's choices; no claim is computed from them. The digest detects damage, not forgery: the
directory must be writable by the service's user alone, like its code (``plan_cache`` refuses one
that is not).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import types
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from everlast.engine.planner.tight import RoundPlan, TightSchedule
from everlast.engine.schedule import RoundSpec

FORMAT = 2
"""The entry layout; a change of layout is a change of key."""
REFUSAL = "targets cannot be met"
"""The prefix of the solver's own refusals (``tight.solve``): only those are kept (any other error
is raised afresh each time)."""


class Store(Protocol):
    """Where entries live: get and put text by key. Both may fail silently (a miss, a lost put)."""

    namespace: str

    def get(self, key: str) -> str | None: ...

    def put(self, key: str, text: str) -> None: ...


@dataclass
class Tally:
    """Solves answered from the store (hits) and searched (misses) inside one ``using`` block."""

    hits: int = 0
    misses: int = 0


_current: ContextVar[tuple[Store | None, Tally] | None] = ContextVar("everlast_solve_store", default=None)
"""The store the planner consults in this context (a thread or task sees its own)."""


@contextmanager
def using(store: Store | None) -> Iterator[Tally]:
    """The planner consults ``store`` inside the block (None: no store, also when an outer block set one)."""
    tally = Tally()
    token = _current.set((store, tally))
    try:
        yield tally
    finally:
        _current.reset(token)


def key(kind: str, args: tuple[Any, ...]) -> str:
    """The entry key of a call: sha256 of (FORMAT, kind, repr of the arguments). The arguments are
    floats, ints and frozen dataclasses of such (``TightOptions``), whose repr is exact and complete."""
    return hashlib.sha256(repr((FORMAT, kind, args)).encode()).hexdigest()


def _digest(namespace: str, k: str, text: str) -> str:
    return hashlib.sha256(f"{namespace}\n{k}\n{text}".encode()).hexdigest()


def seal(store: Store, k: str, body: Any) -> str:
    """An entry's text: its body bound to the namespace and the key by a digest."""
    text = json.dumps(body, allow_nan=True, sort_keys=True)
    return json.dumps({"namespace": store.namespace, "key": k, "body": text,
                       "digest": _digest(store.namespace, k, text)})


def unseal(store: Store, k: str, raw: str | None) -> Any:
    """The body of a stored entry, or None when it is absent or does not match (key, namespace, digest)."""
    if raw is None:
        return None
    try:
        entry = json.loads(raw)
        text = entry["body"]
        ok = (isinstance(text, str) and entry["namespace"] == store.namespace and entry["key"] == k
              and entry["digest"] == _digest(store.namespace, k, text))
        return json.loads(text) if ok else None
    except (ValueError, KeyError, TypeError):
        return None


def _exact(cls: type, d: Any) -> dict[str, Any]:
    """``d`` if it has exactly the fields of dataclass ``cls``, each of exactly its annotated type (an
    int is an int, never a float or a bool; a float a float; ``X | None`` also takes null)."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    if not isinstance(d, dict) or set(d) != names:
        raise ValueError(f"{cls.__name__}: fields differ")
    for name, v in d.items():
        t = hints[name]
        allowed = typing.get_args(t) if isinstance(t, types.UnionType) else (t,)
        if type(v) not in allowed:
            raise ValueError(f"{cls.__name__}.{name}: a value of another type")
    return d


def encode(s: TightSchedule) -> dict[str, Any]:
    return {"specs": [dataclasses.asdict(r) for r in s.specs], "rounds": [dataclasses.asdict(r) for r in s.rounds],
            "n_required": s.n_required, "E1": s.E1, "E2": s.E2, "r1": s.r1, "rD": s.rD, "reserve": s.reserve}


def decode(d: Any, rounds: int) -> TightSchedule:
    """The schedule of an entry's body; ValueError unless it has exactly the solver's shape: its types,
    ``rounds`` rounds numbered 1..rounds, n and every round's sizes positive."""
    if not isinstance(d, dict) or set(d) != {f.name for f in dataclasses.fields(TightSchedule)}:
        raise ValueError("TightSchedule: fields differ")
    scalars = {k: v for k, v in d.items() if k not in ("specs", "rounds")}
    if type(scalars.pop("n_required")) is not int or any(type(v) is not float for v in scalars.values()):
        raise ValueError("TightSchedule: a value of another type")
    if not isinstance(d["specs"], list) or not isinstance(d["rounds"], list):
        raise ValueError("TightSchedule: rounds missing")
    specs = tuple(RoundSpec(**_exact(RoundSpec, r)) for r in d["specs"])
    plans = tuple(RoundPlan(**_exact(RoundPlan, r)) for r in d["rounds"])
    if len(specs) != rounds or len(plans) != rounds or [p.round for p in plans] != list(range(1, rounds + 1)):
        raise ValueError("TightSchedule: not the rounds asked for")
    if d["n_required"] < 1 or any(min(r.T, r.lam, r.R, r.c, r.m_S, r.m_D) < 1 for r in specs):
        raise ValueError("TightSchedule: a size below 1")
    return TightSchedule(specs=specs, rounds=plans, n_required=d["n_required"], **scalars)


def solve_through(solve: Callable[..., TightSchedule], args: tuple[Any, ...], rounds: int,
                  accept: Callable[[TightSchedule], bool]) -> TightSchedule:
    """``solve(*args)``, answered from the current store when it holds that solve: its schedule (used when
    ``accept`` takes it: its certificate meets the targets) or the solver's refusal (raised as the
    ValueError it was). ``rounds``: how many rounds the solve lists."""
    store, tally = _current.get() or (None, Tally())
    if store is None:
        return solve(*args)
    k = key("solve", args)
    body = unseal(store, k, store.get(k))
    if isinstance(body, dict) and set(body) == {"infeasible"} and isinstance(body["infeasible"], str) \
            and body["infeasible"].startswith(REFUSAL):
        tally.hits += 1
        raise ValueError(body["infeasible"])
    if body is not None:
        try:
            stored = decode(body, rounds)
        except (ValueError, TypeError):
            stored = None
        if stored is not None and accept(stored):
            tally.hits += 1
            return stored
    tally.misses += 1
    try:
        s = solve(*args)
    except ValueError as exc:
        if str(exc).startswith(REFUSAL):
            store.put(k, seal(store, k, {"infeasible": str(exc)}))
        raise
    store.put(k, seal(store, k, encode(s)))
    return s


def estimate_through(estimate: Callable[..., float], args: tuple[Any, ...]) -> float:
    """``estimate(*args)`` (a float, +inf when infeasible: search only, never certified), answered from
    the current store when it holds it."""
    store, tally = _current.get() or (None, Tally())
    if store is None:
        return float(estimate(*args))
    k = key("estimate", args)
    body = unseal(store, k, store.get(k))
    if type(body) is float and body > 0.0 and not math.isnan(body):
        tally.hits += 1
        return body
    tally.misses += 1
    v = float(estimate(*args))
    store.put(k, seal(store, k, v))
    return v
