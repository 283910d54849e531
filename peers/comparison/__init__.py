"""What ``everlast compare`` computes: everlast against the alternatives a user would pick instead.

For fixed (epsilon, delta, alpha) and the synthetic thresholds task of ``adversary_sim.iid``
(uniform points on [0, 1), hidden threshold at the median) this computes and runs:

1. **n required vs horizon.** For Q = 10^3 .. 10^9 queries, the labeled-set size n each method
   needs to answer Q queries at expected error <= alpha with (epsilon, delta) privacy for the
   training set. Peers: ``peers.sample_complexity`` (their own accounting and the accuracy rules of
   ``peers.design``). Everlast: ``engine.planner.plan`` (tight accounting) with both halt budgets,
   Claim D.5's (``halt_budget=CLAIM_D5``, ``--halts paper``: the paper's c_i = 64 alpha_i R_i) and
   split-votes (``halt_budget=SPLIT_VOTES``, the CLI's
   default; the most favourable honest one); its n does not depend on Q. Every such number is
   marked ``"computed"``. Where the computed n is small enough (``--max-run-n``) and Q fits the run
   budget (``--queries``), the method is also *run* at that n on Q queries and the entry is marked
   ``"run"`` (the computed n, confirmed or not by the run: ``run_checks`` says how many queries it
   answered and their error).
2. **Crossover.** The horizon Q* beyond which a peer needs more data than everlast. Dwork-Feldman's
   per-query epsilon is exact (the optimal composition of ``peers.accounting``) up to Q = 10^18 and,
   beyond, its Gaussian-DP limit eps0(Q) = mu / sqrt(Q) (the central limit theorem for composition,
   Dong-Roth-Su 2019), with mu solved from (epsilon, delta): the exact values agree with it to
   better than 1e-5 relative from Q = 10^10 on. Dagan-Feldman uses the same eps0(Q); sparse vector
   is extrapolated by the power law of its last computed decade. Q* is *computed*, never run.
3. **Queries answered before refusal vs n.** Every method built at each ``--n`` on the same task,
   asked ``--queries`` i.i.d. queries: how many it answers before its first refusal and the error of
   those answers. Everlast runs with an explicit small schedule (``everlast_run_schedule``): its
   certified epsilon (``engine.planner.certify``, tight) is reported as it is -- far above the
   target, or +inf with the reason -- and never presented as meeting the target.
4. **Domain size.** For thresholds on a finite grid X, the generic private learner's computed n
   against |X| (it grows with ln|X| and is impossible on the reals), everlast's (independent of
   |X|), and runs of the learner on grids of each size.

The private learner's rows are the mechanism the daemon serves (``mechanism = "private-learner"``,
``engine.learner``, sampled exactly; docs/privacy/learner.md), run through
``peers.served_learner``: on all finite float64 (what the daemon receives) and on a grid. Their n is
Theorem L2's for the comparison's criterion, expected error <= alpha
(``engine.planner.learner.n_expected_error``; ``everlast plan --mechanism private-learner`` prints
the (alpha, beta) form). The row "X = reals" stays: on the reals no private learner exists.

Everlast's n is the planner's n for its default design, the cheapest one whose query privacy is
proven (docs/PRIVACY.md): it certifies the training set and the queries at the target epsilon.
The JSON says which design next to every everlast number.

Modules: ``settings`` (the methods and the options), ``sizes`` (computed sample sizes, the
extrapolation past the exact accountants, the crossovers), ``runs`` (building and running a method
on the task), ``compute`` (the whole comparison as one JSON-ready dict). Pure computation and runs:
the tables, plots and the command are ``everlast.cli.compare`` and its two siblings.
"""
