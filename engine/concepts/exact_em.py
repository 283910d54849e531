"""LabelBoost's exponential mechanism, sampled exactly (paper, Appendix C.1, step 4; docs/privacy/genericbbl.md 8).

LabelBoost draws a dichotomy h of the class on the distinct points of S-hat o D-hat with
P[h] = exp(score(h) / 2) / Z (epsilon = 1, sensitivity 1; score = agreements with the labeled part).
Every class lists its distinct dichotomies in *groups* of equal score, so that a dichotomy is a
(group, member) pair, one to one. The draws use only the private learner's exact primitives
(``engine.learner.exact``, ``engine.learner.sampler``; docs/privacy/learner.md 3, Lemmas X1-X6): given fair
bits, every outcome has exactly its ideal probability (a float decides an outcome only where a proven
error bound shows that every real number consistent with it decides the same way).

* ``sample_group`` (thresholds, stumps, the finite class): group g with probability
  n_g e^{v_g/2} / sum_h n_h e^{v_h/2} -- Lemma X5 with epsilon = 1, errors E_g = max v - v_g and
  sizes n_g (``sampler.sample_cell``) -- then a uniform member (``exact.below``). A member of group g
  then has probability (n_g e^{v_g/2} / Z)(1 / n_g) = e^{v_g/2} / Z: the exponential mechanism,
  given that the class's (group, member) -> dichotomy map is a bijection onto its distinct
  dichotomies with score v_g on group g (each class states why).
* ``sample_range`` (intervals): a two-stage rejection sampler, Lemma X6's construction with
  LabelBoost's own counts (its docstring has the proof).

The number of bits drawn depends on the data (as in the learner: a timing channel,
docs/privacy/learner.md 3); the stream after the draw is still fresh (the bits used form a stopping time).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from everlast.engine.concepts.random_order import check_word_generator
from everlast.engine.learner.exact import (
    Bits,
    BitSource,
    DyadicSampler,
    LazyUniform,
    below,
    bernoulli_exp,
    float_decide,
    gamma,
    invert,
)
from everlast.engine.learner.exponents import exponents
from everlast.engine.learner.sampler import _add, _norm, sample_cell

I64 = NDArray[np.int64]
U64 = NDArray[np.uint64]

LEVEL = 500
"""Exponent band of the float pass (``_float_pass``): suffix sums are formed 2 LEVEL wide in exponent."""


def bits_of(rng: np.random.Generator) -> Bits:
    """Fair 64-bit words from ``rng`` (checked: ``check_word_generator``)."""
    check_word_generator(rng)
    return Bits(rng)


MAX_SCORE_RANGE = 1 << 40
"""The largest score range (max - min) the samplers take. Lemma X3 needs y = (t - m) ln 2 in [0, 1],
which holds while t = range / (2 ln 2) < 2^44; LabelBoost's range is at most |S-hat| <= 2^32."""


def _check_score_range(d: int) -> None:
    if d > MAX_SCORE_RANGE:
        # the range is a function of the labels: it stays out of the message
        raise ValueError(f"LabelBoost's score range exceeds {MAX_SCORE_RANGE} (Lemma X3's premise)")


def sample_group(sizes: U64, score: I64, bits: BitSource) -> tuple[int, int]:
    """(g, r): group g with probability sizes_g exp(score_g / 2) / Z exactly, then r uniform in
    [0, sizes_g). Groups of size 0 are never drawn; at least one size must be positive."""
    s = np.ascontiguousarray(sizes, dtype=np.uint64).ravel()
    v = np.ascontiguousarray(score, dtype=np.int64).ravel()
    pos = s > 0
    live = v if pos.all() else v[pos]
    top = int(live.max())
    _check_score_range(top - int(live.min()))
    g = sample_cell(s, top - v, 1.0, bits)
    return g, below(bits, int(s[g]))


# -- intervals --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RangeDraw:
    """A nonempty range drawn by ``sample_range``: cuts i < j, i the i_off-th cut of group a and j
    the j_off-th cut of group b (a <= b)."""

    a: int
    i_off: int
    b: int
    j_off: int


def strict_pair(t: int) -> tuple[int, int]:
    """The t-th pair (i, j), 0 <= i < j, listed by j then i: t = j (j - 1) / 2 + i."""
    j = (math.isqrt(8 * t + 1) + 1) // 2
    return t - j * (j - 1) // 2, j


def sample_range(sizes: I64, V: I64, bits: BitSource, fast: bool = True) -> RangeDraw | None:
    """LabelBoost for intervals over groups of cuts, exactly; ``None`` is the empty labeling.

    *Setting* (``intervals.interval_em``). The cuts 0..l between the l distinct points fall into
    groups a = 0..q of s_a >= 1 consecutive cuts (``line``). The nonempty dichotomies are the ranges
    of ranks [i, j), one for each pair of cuts i < j; with i in group a and j in group b (a <= b) the
    range scores N0 + V_b - V_a, and the empty labeling scores N0. With dA_a = V_a - min V,
    dB_b = max V - V_b and dD = max V - min V (so dA_a + dB_a = dD), the weights exp(score / 2),
    times the constant exp(-(N0 + dD) / 2), summed over the members of each outcome class, are

        W(E) = e^{-dD/2},   W(a, a) = C(s_a, 2) e^{-dD/2},   W(a, b) = s_a s_b e^{-dA_a/2} e^{-dB_b/2}  (a < b),

    C(s, 2) = s (s - 1) / 2 pairs i < j inside one group and s_a s_b across two. This is Lemma X6's
    W (docs/privacy/learner.md 3) with the diagonal count T(s) = s (s + 1) / 2 replaced by C(s, 2) and one
    more outcome E of the same weight as a diagonal pair: the learner's s_a pairs c_lo = c_hi of each
    cell (all the empty interval) become the single E, since LabelBoost counts each distinct
    dichotomy once.

    *Proposal and acceptance.* With Lemma X3's exponents mA_a, mB_b, mD of dA_a, dB_b, dD (epsilon = 1;
    ``exponents.exponents``), alpha_a = s_a 2^{-mA_a}, beta_b = s_b 2^{-mB_b}:

        V(E) = 2^{-mD},   V(a, a) = C(s_a, 2) 2^{-mD},   V(a, b) = alpha_a beta_b,
        acc(E) = acc(a, a) = e^{-dD/2} 2^{mD},   acc(a, b) = (e^{-dA_a/2} 2^{mA_a}) (e^{-dB_b/2} 2^{mB_b}),

    so W = V acc, each factor of acc in (0.45, 1] (Lemma X3) and drawn as one Bernoulli (Lemma X4).
    A round draws an outcome with probability V / Omega, Omega = sum V, and accepts it with
    probability acc; rounds are independent (fresh bits). So the accepted outcome has probability
    W / sum W (the rejection argument of Lemma X5), and a round is accepted with probability > 0.2.

    *The proposal, exactly.* Stage 1: the index k over (E, group 0, ..., group q) with probability
    omega_k / Omega, omega_E = V(E) and omega_a = sum_{b >= a} V(a, b) = alpha_a G_{a+1} + C(s_a, 2) 2^{-mD}
    with G_{a+1} = sum_{b > a} beta_b (the separable score makes the marginal a suffix sum), by
    Lemma X1 from cumulative bounds: the float pass of ``_float_pass`` (numpy, with Lemma X2's bound)
    when every s_a < 2^53 (and ``fast``); otherwise, or when that pass cannot decide, the enclosure
    pass ``_marginal_bounds`` (Lemma X6's, P = 128, 256, ... bits) on the same uniform.
    Stage 2, given group a: b = a with probability V(a, a) / omega_a and b > a with V(a, b) / omega_a;
    dividing by alpha_a > 0, the dyadic weights (s_a - 1) 2^{-(mD + 1 - mA_a)} and beta_b
    (``DyadicSampler``, Lemmas X1, X2). So the outcome has probability V / Omega exactly.

    *Members.* (a, b), a < b: the two cuts uniform and independent in their groups (s_a s_b equally
    likely pairs); (a, a): t uniform in [0, C(s_a, 2)) and (i, j) = ``strict_pair(t)``, the bijection
    that lists the pairs i < j by j then i (C(j, 2) pairs precede those with larger cut j). Each
    dichotomy of the class therefore has probability exp(score / 2) / Z. ∎
    """
    s = np.asarray(sizes, dtype=np.int64)
    v = np.asarray(V, dtype=np.int64)
    if s.ndim != 1 or s.shape != v.shape or s.size == 0 or int(s.min()) < 1:
        raise ValueError("sample_range needs one size >= 1 and one V per group")
    vmin, vmax = int(v.min()), int(v.max())
    dA, dB, dD = v - vmin, vmax - v, vmax - vmin
    _check_score_range(dD)
    mA, mB = exponents(1.0, dA), exponents(1.0, dB)
    mD = int(exponents(1.0, np.array([dD], dtype=np.int64))[0])
    sz = [int(x) for x in s.tolist()]
    ma, mb = [int(x) for x in mA.tolist()], [int(x) for x in mB.tolist()]
    pass1 = _float_pass(s, mA, mB, mD)[:3] if fast and max(sz) < 1 << 53 else None
    cache: dict[int, tuple[list[int], list[int]]] = {}

    def stage1(p: int) -> tuple[list[int], list[int]]:
        if p not in cache:
            cache[p] = _marginal_bounds(sz, ma, mb, mD, p)
        return cache[p]

    sizes_u = s.astype(np.uint64)
    while True:
        u = LazyUniform(bits)
        k = float_decide(*pass1, u) if pass1 is not None else None
        if k is None:
            k = invert(stage1, u)
        if k == 0:  # E
            if bernoulli_exp(bits, Fraction(dD, 2), mD):
                return None
            continue
        a = k - 1
        wsz = np.concatenate([np.array([sz[a] - 1], dtype=np.uint64), sizes_u[a + 1 :]])
        wex = np.concatenate([np.array([mD + 1 - ma[a]], dtype=np.int64), mB[a + 1 :]])
        t = DyadicSampler(wsz, wex, fast=fast).draw(bits)
        if t == 0:  # b = a
            if not bernoulli_exp(bits, Fraction(dD, 2), mD):
                continue
            i, j = strict_pair(below(bits, sz[a] * (sz[a] - 1) // 2))
            return RangeDraw(a, i, a, j)
        b = a + t
        if not (bernoulli_exp(bits, Fraction(int(dA[a]), 2), ma[a])
                and bernoulli_exp(bits, Fraction(int(dB[b]), 2), mb[b])):
            continue
        return RangeDraw(a, below(bits, sz[a]), b, below(bits, sz[b]))


FLUSH = 2.0**-960
"""Float weights below this are set to 0 (Lemma X2 wants every non-zero weight normal)."""
SHIFT_FLOOR = 4000
"""Exponent shifts below -SHIFT_FLOOR are clamped (``_float_pass``): their terms underflow to 0 either way."""


def _float_pass(s: I64, mA: I64, mB: I64, mD: int) -> tuple[NDArray[np.float64], Fraction, Fraction, int]:
    """Float cumulative sums c of 2^E (omega_E, omega_0, ..., omega_q) (``sample_range``) and the
    (rho, Theta) of Lemma X2 for ``exact.float_decide``, and the scale exponent E. Precondition:
    1 <= s_a < 2^53. O(K log K) numpy work and one numpy step per band of LEVEL exponents.

    The suffix sums G_{a+1} = sum_{b > a} s_b 2^-mB_b span any range of exponents, so they are formed
    in bands: with M_a = min_{b > a} mB_b and l_a = floor(M_a / L) (L = LEVEL; M is non-decreasing in
    a, so each band is a run of a), Gamma_a = 2^{l_a L} G_{a+1} is summed over the b > a with
    mB_b < (l_a + 2) L, each term ldexp(s_b, -(mB_b - l_a L)) exact and normal (exponent in (-2L, 0]).
    The dropped terms are below 2^53 2^{-2L} each, while Gamma_a >= 2^{-(L - 1)} (the term of the b
    attaining M_a), so they cost a relative K 2^{54 - L} < u; with the summation (positive normal
    terms, any order; Higham 2002, 4.2) |Gamma_hat - Gamma_a| <= gamma_{K+1} Gamma_a. Then, with
    e_a = mA_a + l_a L and E = min(mD, min_a e_a), the scaled weights are

        2^E omega_a = s_a Gamma_a 2^{-(e_a - E)} + C(s_a, 2) 2^{-(mD - E)},   2^E omega_E = 2^{-(mD - E)},

    all shifts >= 0. s_a, s_a - 1 are exact doubles; fl(s_a Gamma_hat) is one rounding (a normal
    product, in [2^-499, K 2^106]); fl(s_a (s_a - 1)) / 2 one rounding; each ldexp is exact unless
    its result is subnormal or 0 (absolute error <= 2^-1075); the final sum one rounding (exact if
    subnormal). So |w_hat - w| <= gamma_{K+3} w + 2^-1073. A result below 2^-960 is set to 0 (its
    true value is below 2^-959), as is 2^E omega_E when below 2^-960: every weight meets Lemma X2's
    premise with eta = gamma_{K+3}, theta = 2^-959 (partial sums below K 2^108 < 2^1000), so
    rho = eta + 2 gamma_{K+1} and Theta = 2 (K + 1) theta over the K + 1 entries. The total is at least
    2^-500 (2^E omega_E = 1 if E = mD, else the a attaining E has s_a Gamma_a >= 2^-499), so Theta
    is negligible and the pass decides unless U falls within about rho of a boundary."""
    K = int(s.size)
    f = s.astype(np.float64)
    gam = np.zeros(K)
    e = np.full(K, mD, dtype=np.int64)  # the last group has no b > a: only its diagonal
    if K > 1:
        M = np.minimum.accumulate(mB[:0:-1])[::-1]  # M[a] = min_{b > a} mB_b, a = 0..K-2
        band = M // LEVEL
        by_m = np.argsort(mB[1:], kind="stable") + 1  # candidates b >= 1, by exponent
        m_sorted = mB[by_m]
        starts = np.flatnonzero(np.concatenate([[True], band[1:] != band[:-1]]))
        for a0, a1 in zip(starts.tolist(), [*starts[1:].tolist(), K - 1], strict=True):
            lv = int(band[a0]) * LEVEL
            lo, hi = np.searchsorted(m_sorted, [lv, lv + 2 * LEVEL], side="left")
            bs = np.sort(by_m[lo:hi])  # b with mB_b in [lv, lv + 2 L), by position
            t = np.ldexp(f[bs], (lv - mB[bs]).astype(np.int32))
            suffix = np.concatenate([np.cumsum(t[::-1])[::-1], [0.0]])
            gam[a0:a1] = suffix[np.searchsorted(bs, np.arange(a0, a1), side="right")]
            e[a0:a1] = mA[a0:a1] + lv
    E = min(mD, int(e[: K - 1].min())) if K > 1 else mD
    # Shifts are clamped at -SHIFT_FLOOR before the int32 cast (a shift of -2^32 would wrap to 0):
    # a clamped term is below 2^140 2^-SHIFT_FLOOR, far under FLUSH, and ldexp returns 0 for it as
    # it does for the true shift, so the clamp changes no output (review of exact LabelBoost, E1).
    sa = np.maximum(E - e, -SHIFT_FLOOR).astype(np.int32)
    sd = max(E - mD, -SHIFT_FLOOR)
    w = np.ldexp(f * gam, sa) + np.ldexp(f * (f - 1.0) * 0.5, sd)
    w[w < FLUSH] = 0.0
    w_empty = math.ldexp(1.0, sd)
    c = np.cumsum(np.concatenate([[w_empty if w_empty >= FLUSH else 0.0], w]))
    return c, gamma(K + 3) + 2 * gamma(K + 1), Fraction(2 * (K + 1), 1 << 959), E


def _marginal_bounds(sizes: list[int], ma: list[int], mb: list[int], md: int, p: int) -> tuple[list[int], list[int]]:
    """Cumulative integer bounds, at one common scale, on (omega_E, omega_0, ..., omega_q) of
    ``sample_range``: the right-to-left pass of ``sampler.interval_marginal_bounds`` (enclosures with
    (p+1)-bit mantissas, lo rounded down and hi up at every step; relative width O(K 2^-p)) with the
    diagonal count C(s, 2) and the entry omega_E = 2^-md in front."""
    K = len(sizes)
    out: list[tuple[int, int, int]] = [(0, 0, 0)] * (K + 1)
    out[0] = _norm(1, 1, -md, p)
    g = (0, 0, 0)
    for a in range(K - 1, -1, -1):
        s = sizes[a]
        c2 = s * (s - 1) // 2
        w = _norm(c2, c2, -md, p)
        if g[1]:
            w = _add(w, _norm(s * g[0], s * g[1], g[2] - ma[a], p), p)
        out[a + 1] = w
        g = _add(g, _norm(s, s, -mb[a], p), p)
    top = max(w[2] for w in out if w[1])
    lo = [w[0] >> (top - w[2]) if w[1] else 0 for w in out]
    hi = [-(-w[1] >> (top - w[2])) if w[1] else 0 for w in out]
    return list(itertools.accumulate(lo)), list(itertools.accumulate(hi))
