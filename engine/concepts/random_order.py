"""Uniformly random orders and subsets of range(n): exact, and near ``np.sort`` speed.

numpy's ``Generator.choice(n, k, replace=False)`` is exact, but for k > n/50 it runs a
Fisher-Yates shuffle over an n-element int64 array: one cache miss per element once the array
outgrows the cache (3.8x ``np.sort`` of n floats at n = 1e7 on this machine's SIMD sort, and
growing with n). Here a random order is a *sort*: each index i gets an independent uniform 32-bit
key r_i, the packed words (r_i << 32) | i are sorted with numpy's SIMD sort, and every run of
equal keys (expected n^2 / 2^33 pairs) is then put in a uniformly random order.

Why the result is exactly uniform: relabeling the indices by any fixed permutation leaves the
joint law of the keys unchanged (they are i.i.d.), hence also the law of the ordered partition
of range(n) into runs of equal keys (runs in increasing key order). Given that partition, the
order within each run is uniform and independent of the labels. So the law of the output
sequence is invariant under every relabeling of range(n): it is the uniform law on the n!
orders. Its first k entries are a uniformly random ordered k-subset. (The keys are 32-bit halves
of the bit generator's raw outputs: ``check_word_generator`` refuses generators whose raw outputs
are not 64 fair bits, e.g. MT19937's 32-bit ones, which would leave every other key 0.)

Sizes: ``random_order`` needs n <= 2^32 (``MAX_N``; the engine refuses m_D above it,
``engine.design.noise_plan``); ``sorted_subset`` takes any n <= 2^62 in O(k) memory.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from everlast.engine import overlap

U32 = NDArray[np.uint32]
I64 = NDArray[np.int64]

MAX_N = 1 << 32
"""The largest n ``random_order`` orders (the index fills the low 32 bits of a packed word)."""
MAX_SUBSET_N = 1 << 62
"""The largest n ``sorted_subset`` draws from (R, the queries of a round: ``engine.design.MAX_QUERIES``)."""
CHOICE_RATIO = 50
"""numpy's ``choice(n, k, replace=False)`` is O(k) (Floyd's method) for k <= n / 50; above, it
shuffles an n-element array."""
WORD_GENERATORS = ("PCG64", "PCG64DXSM", "SFC64", "Philox")
"""numpy bit generators whose ``random_raw`` outputs are 64 fair bits (MT19937's are 32)."""
KEY_CHUNK = 1 << 20
"""Keys drawn per ``random_raw`` call (even: whole 64-bit words): 4 MB of scratch, not 4n bytes."""
assert KEY_CHUNK % 2 == 0, "an odd chunk would split a 64-bit word and change the keys"
CONTIGUOUS_MAX = 1 << 22
"""Up to this many entries ``packed_order`` returns a contiguous copy; above, a strided view."""
_LO, _HI = (0, 1) if sys.byteorder == "little" else (1, 0)  # uint32 halves of a uint64 word


def random_order(n: int, k: int, rng: np.random.Generator) -> U32:
    """The first k entries o of a uniformly random permutation of range(n) (a uniformly random
    ordered k-subset) as uint32 (contiguous up to ``CONTIGUOUS_MAX`` entries); n <= 2^32."""
    if not 0 <= k <= n:
        raise ValueError("need 0 <= k <= n")
    if n > MAX_N:
        raise ValueError("random orders of more than 2^32 elements are not supported")
    if k <= n // CHOICE_RATIO:  # numpy's own exact sampler is cheap here (Floyd's, O(k)); else it shuffles n
        o = rng.choice(n, size=k, replace=False)
        return o.astype(np.uint32)
    return packed_order(n, k, rng)


class PreparedOrder:
    """``random_order(n, k, rng)`` begun before the transition that needs it (``engine.overlap``):
    the predictor starts it while a round's last eighth is answered, when n (D-hat's size), k
    (T * lambda of the next round) and the ORDER stream are already fixed. ``fresh`` makes that
    stream's generator again from its seed, so a job asked for other sizes, asked for twice (a
    transition retried after a failure: the first caller may have changed its array in place), or
    never begun on a thread is computed from the same draws: the same bytes whichever way."""

    __slots__ = ("_pending", "_pid", "fresh", "k", "n")

    def __init__(self, n: int, k: int, fresh: Callable[[], np.random.Generator]) -> None:
        self.n, self.k, self.fresh = n, k, fresh
        self._pid = os.getpid()
        self._pending: overlap.Pending[U32] | None = overlap.begin(random_order, n, k, fresh(), work=n)

    def job(self, n: int, k: int) -> overlap.Pending[U32]:
        """The order of the first k of range(n): the prepared job once, if it has these sizes and
        this is the process that began it (a forked child has the job's future but not its thread)."""
        pending, self._pending = self._pending, None
        if pending is not None and (n, k) == (self.n, self.k) and os.getpid() == self._pid:
            return pending
        if pending is not None and os.getpid() == self._pid:
            pending.cancel()
        return overlap.begin(random_order, n, k, self.fresh(), work=n)

    def cancel(self, wait_running: bool = True) -> None:
        """Drop the job (waiting for it if it runs, unless told not to: ``engine.overlap.Pending.cancel``)."""
        pending, self._pending = self._pending, None
        if pending is not None and os.getpid() == self._pid:
            pending.cancel(wait_running)


OrderSource = np.random.Generator | PreparedOrder
"""What ``ConceptClass.next_round`` draws S_{i+1}'s order from: the ORDER stream's generator, or
that order already begun (``PreparedOrder``)."""


def order_job(n: int, k: int, source: OrderSource) -> overlap.Pending[U32]:
    """``random_order(n, k, ...)`` from ``source``, on a second core where that pays
    (``engine.overlap.begin``; use the result as a context manager around the caller's own work)."""
    if isinstance(source, PreparedOrder):
        return source.job(n, k)
    return overlap.begin(random_order, n, k, source, work=n)


def order_now(n: int, k: int, source: OrderSource) -> U32:
    """``random_order(n, k, ...)`` from ``source``, for a caller with nothing to do meanwhile."""
    if isinstance(source, PreparedOrder):
        return source.job(n, k).result()
    return random_order(n, k, source)


def packed_order(n: int, k: int, rng: np.random.Generator, key_bits: int = 32) -> U32:
    """``random_order`` by sorting packed (key << 32) | index words (module
    docstring). Fewer ``key_bits`` only make ties (and the tie-breaking path) common, for tests."""
    check_word_generator(rng)
    keys = np.arange(n, dtype=np.int64).view(np.uint64)  # the index in the low half ...
    halves = keys.view(np.uint32).reshape(n, 2)
    for lo in range(0, n, KEY_CHUNK):  # ... the key above, in chunks: no n-sized temporary
        m = min(KEY_CHUNK, n - lo)  # even except the last: the same raw words as one call
        r = np.asarray(rng.bit_generator.random_raw((m + 1) // 2), dtype=np.uint64).view(np.uint32)[:m]
        halves[lo : lo + m, _HI] = r if key_bits == 32 else r >> np.uint32(32 - key_bits)
    keys.sort()
    _shuffle_runs(halves, rng)
    if k <= CONTIGUOUS_MAX:  # the callers' column reductions run ~5x faster on a contiguous copy
        return np.ascontiguousarray(halves[:k, _LO])
    return halves[:k, _LO]  # large: a copy would cost more in fresh memory than it saves


def _shuffle_runs(halves: U32, rng: np.random.Generator) -> None:
    """Put each run of equal high halves (sorted keys) in a uniformly random order, in place (the
    sort leaves a run in increasing index order)."""
    hi = halves[:, _HI]
    ties = np.zeros(hi.size, dtype=bool)  # word t has the same key as word t - 1
    np.equal(hi[1:], hi[:-1], out=ties[1:])
    tied = np.flatnonzero(ties)  # the one other pass over all n words; ~n^2/2^33 entries
    if tied.size == 0:
        return
    members = np.concatenate([tied - 1, tied])  # every word in a run of length >= 2 ...
    members.sort()
    members = members[np.concatenate([[True], members[1:] != members[:-1]])]  # ... once, increasing
    run = np.cumsum(~ties[members])  # a run starts at a member that does not tie its predecessor
    low = halves[members, _LO]
    while True:  # i.i.d. uniform tie-breakers; redraw on the (2^-53-rare) tie among them
        u = rng.random(members.size)
        order = np.lexsort((u, run))
        us, rs = u[order], run[order]
        if not np.any((us[1:] == us[:-1]) & (rs[1:] == rs[:-1])):
            break
    halves[members, _LO] = low[order]


def sorted_subset(n: int, k: int, rng: np.random.Generator) -> I64:
    """A uniformly random k-subset of range(n), sorted, as int64; O(k) memory for any n <= 2^62.

    k = n: everything. 2k > n: the complement of a uniform (n - k)-subset (an n-byte mask, less than
    the 8k-byte output). k <= n / 50: numpy's ``choice`` (Floyd's method, O(k)). Otherwise
    ``first_distinct``."""
    if not 0 <= k <= n:
        raise ValueError("need 0 <= k <= n")
    if n > MAX_SUBSET_N:
        raise ValueError("subsets of more than 2^62 elements are not supported")
    if k == n:
        return np.arange(n, dtype=np.int64)
    if 2 * k > n:  # the complement of a uniform (n - k)-subset is a uniform k-subset
        keep = np.ones(n, dtype=bool)
        keep[sorted_subset(n, n - k, rng)] = False
        return np.flatnonzero(keep).astype(np.int64)
    if k <= n // CHOICE_RATIO:
        return np.sort(rng.choice(n, size=k, replace=False)).astype(np.int64)
    return np.sort(first_distinct(n, k, rng))


def first_distinct(n: int, k: int, rng: np.random.Generator) -> I64:
    """The first k distinct values of an i.i.d. uniform sequence on range(n), in order of first
    appearance (k <= n / 2 keeps the expected length below 1.39 k); O(k) memory.

    Why the set is a uniform k-subset: a fixed permutation of range(n) applied to every term leaves
    the law of an i.i.d. uniform sequence unchanged, and maps its first k distinct values to the
    permuted ones; so the law of that set is invariant under every permutation, i.e. uniform. The
    sequence is drawn in batches (``Generator.integers``: exact, rejection-based); the batch sizes
    only decide how many terms are drawn past the k-th distinct value, not which values those are."""
    if not 0 <= k <= n // 2:
        raise ValueError("need 0 <= k <= n/2")
    seen = np.zeros(0, dtype=np.int64)  # distinct values so far, in order of first appearance
    while seen.size < k:
        need = k - seen.size
        # expected draws to reach k distinct from seen.size: n ln((n - seen) / (n - k)); 5% more
        b = int(1.05 * n * math.log1p(need / (n - k))) + 64
        allv = np.concatenate([seen, rng.integers(0, n, size=b, dtype=np.int64)])
        _, first = np.unique(allv, return_index=True)
        first.sort()
        seen = allv[first]
    return seen[:k]


def check_word_generator(rng: np.random.Generator) -> None:
    """Raise ``TypeError`` unless ``rng``'s bit generator emits 64 fair bits per raw output (the
    exact samplers and ``packed_order`` read ``random_raw`` as 64-bit words)."""
    name = type(rng.bit_generator).__name__
    if name not in WORD_GENERATORS:
        raise TypeError(f"needs a numpy bit generator with 64-bit raw outputs ({', '.join(WORD_GENERATORS)}); "
                        f"got {name}")
