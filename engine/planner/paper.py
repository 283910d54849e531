"""The paper's own schedule (GenericBBL, section 5), formula by formula. Its n is reported, never run.

For round i (alpha_i = alpha/2^i, beta_i = beta/2^i, step 1 and 3(g)):

  lambda_i  = (8 VC log(13/alpha_i) + 4 log(2/beta_i)) / alpha_i                (Theorem A.2)
  T_i       = tau lambda_i ln(1/delta) ln^2(lambda_i/(eps alpha_i beta_i delta)) / (alpha_i eps),
              tau = 1.1e10                                                     (step 3(a))
  |S_i|     = lambda_i T_i
  R_i       = 25600 |S_i| / eps                                                (step 3(c))
  c_i       = 64 alpha_i R_i              (uncapped as written; ``cap_c`` caps it at R_i)
  eps'_i    = 1 / (3 sqrt(c_i ln(2/delta))),   delta'_i = delta / (2 c_i)      (step 3(c))
  r-hat     = eps / (3 + e^{eps+4})        for S_1 <- S, S-hat_i <- S_i, D-hat_i <- D_i
  n         = |S_1| / r-hat
            = 8 tau/(alpha^3 eps^2) (8 VC log(26/alpha) + 4 log(4/beta))^2 ln(1/delta)
              ln^2((64 VC log(26/alpha) + 32 log(4/beta))/(eps alpha^2 beta delta)) (3 + e^{eps+4}).

Log conventions: the logs inside lambda_i follow ``lambda_log`` (default log2, Blumer et al.; as in
docs/notes/calibration.md); every other log is natural. With those conventions its table (i)
is reproduced (T_1 = 4.26e18, lambda_1 = 1789, n = 1.15e24 at eps = 1, alpha = 0.1).

The integer schedule handed to the certifier rounds lambda, T, R and c up and the subsample sizes
down (so realised rates never exceed r-hat).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from everlast.engine.planner import bt
from everlast.engine.planner.learning import (
    CLAIM_D5,
    SPLIT_VOTES,
    HaltBudget,
    LambdaLog,
    halt_budget,
    lambda_real,
    p_top,
)
from everlast.engine.schedule import RoundSpec

TAU = 1.1e10


@dataclass(frozen=True, slots=True)
class PaperRound:
    """One round of the paper's schedule, real-valued as the formulas give it."""

    round: int
    alpha: float
    beta: float
    lam: float
    T: float
    S_size: float
    R: float
    c: float
    eps_bt: float
    delta_bt: float
    S_hat: float
    D_hat: float
    gap_ratio: float
    """Lemma C.3's gap over 2 alpha_i (P1 holds iff <= 1): the "gap" column of calibration (i)."""
    d7_ratio: float
    """Lemma C.4's T over T_i (accuracy; <= 1 is needed)."""


@dataclass(frozen=True, slots=True)
class PaperSchedule:
    epsilon: float
    delta: float
    alpha: float
    beta: float
    vc_dim: int
    tau: float
    r_hat: float
    rounds: tuple[PaperRound, ...]
    n_real: float
    """|S_1| / r-hat from the real-valued formulas."""
    n_formula: float
    """The closed form of step 'Initial input' (equal to n_real up to float error)."""
    specs: tuple[RoundSpec, ...]
    """The schedule rounded to integers (what an engine would run)."""
    n_required: int
    d6_ratios: tuple[float, ...]
    """lambda_{i+1} T_{i+1} / |D-hat_i| (Claim D.6 needs <= 1), for i = 1..K-1."""


def paper_n_formula(epsilon: float, delta: float, alpha: float, beta: float, vc_dim: int,
                    tau: float = TAU, lambda_log: LambdaLog = "log2") -> float:
    """The paper's n (Initial input of GenericBBL)."""
    lg = math.log2 if lambda_log == "log2" else math.log
    a = 8.0 * vc_dim * lg(26.0 / alpha) + 4.0 * lg(4.0 / beta)
    b = 64.0 * vc_dim * lg(26.0 / alpha) + 32.0 * lg(4.0 / beta)
    return (8.0 * tau / (alpha**3 * epsilon**2) * a * a * math.log(1.0 / delta)
            * math.log(b / (epsilon * alpha**2 * beta * delta)) ** 2
            * (3.0 + math.exp(epsilon + 4.0)))


def paper_schedule(
    epsilon: float,
    delta: float,
    alpha: float,
    beta: float = 0.05,
    vc_dim: int = 1,
    rounds: int = 12,
    *,
    tau: float = TAU,
    lambda_log: LambdaLog = "log2",
    budget: HaltBudget = CLAIM_D5,
    k: float = 2.0,
    cap_c: bool = False,
    boundaries: int = 1,
) -> PaperSchedule:
    """The paper's schedule for K = ``rounds`` rounds (the last one repeats when run).

    ``budget=SPLIT_VOTES`` replaces c_i by the split-votes budget (everything else stays the
    paper's); ``cap_c`` caps the paper's c_i at R_i.
    """
    r_hat = epsilon / (3.0 + math.exp(epsilon + 4.0))
    out: list[PaperRound] = []
    specs: list[RoundSpec] = []
    for i in range(1, rounds + 1):
        a_i, b_i = alpha / 2**i, beta / 2**i
        lam = lambda_real(a_i, b_i, vc_dim, lambda_log)
        T = (tau * lam * math.log(1.0 / delta)
             * math.log(lam / (epsilon * a_i * b_i * delta)) ** 2 / (a_i * epsilon))
        S = lam * T
        R = 25600.0 * S / epsilon
        lam_int = math.ceil(lam - 1e-9)
        if budget == CLAIM_D5:
            c = 64.0 * a_i * R
            if cap_c:
                c = min(c, R)
        else:
            c = min(R, k * R * p_top(a_i, lam_int, boundaries))
        eps_bt = 1.0 / (3.0 * math.sqrt(c * math.log(2.0 / delta)))
        delta_bt = delta / (2.0 * c)
        out.append(PaperRound(
            round=i, alpha=a_i, beta=b_i, lam=lam, T=T, S_size=S, R=R, c=c, eps_bt=eps_bt,
            delta_bt=delta_bt, S_hat=r_hat * S, D_hat=r_hat * R,
            gap_ratio=bt.gap_ratio(a_i, eps_bt, delta_bt, T),
            d7_ratio=bt.accuracy_t(a_i, eps_bt, R, b_i) / T,
        ))
        # integer version
        T_int = math.ceil(T)
        R_int = math.ceil(25600.0 * lam_int * T_int / epsilon)
        if budget == CLAIM_D5:
            c_int = math.ceil(64.0 * a_i * R_int)
            if cap_c:
                c_int = min(c_int, R_int)
        else:
            c_int = halt_budget(SPLIT_VOTES, R_int, a_i, a_i, lam_int, k, boundaries)
        specs.append(RoundSpec(
            T=T_int, lam=lam_int, R=R_int, c=c_int,
            eps_bt=1.0 / (3.0 * math.sqrt(c_int * math.log(2.0 / delta))),
            delta_bt=delta / (2.0 * c_int), alpha=a_i,
            m_S=max(1, math.floor(r_hat * lam_int * T_int)), m_D=max(1, math.floor(r_hat * R_int)),
            gamma=None, beta=b_i,
        ))
    d6 = tuple(out[i + 1].S_size / out[i].D_hat for i in range(len(out) - 1))
    n_real = out[0].S_size / r_hat
    return PaperSchedule(
        epsilon=epsilon, delta=delta, alpha=alpha, beta=beta, vc_dim=vc_dim, tau=tau, r_hat=r_hat,
        rounds=tuple(out), n_real=n_real,
        n_formula=paper_n_formula(epsilon, delta, alpha, beta, vc_dim, tau, lambda_log),
        specs=tuple(specs), n_required=math.ceil(specs[0].labeled_size / r_hat), d6_ratios=d6,
    )
