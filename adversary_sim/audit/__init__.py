"""Privacy audits of the engine: the game of Definition 3.4 / Figure 1 (Naor, Nissim, Stemmer, Yan
2023) played many times, turned into an empirical epsilon lower bound with Clopper-Pearson limits
(Jagielski et al. 2020; Nasr et al. 2021) and set beside the planner's claim. See docs/ADVERSARY.md.

    from everlast.adversary_sim.audit import run_audit
    record = run_audit("training", "no-noise", trials=2000, seed=1)
"""

from everlast.adversary_sim.audit.games import ATTACKS, DEFAULT_ATTACKS
from everlast.adversary_sim.audit.runner import GAMES, run_audit
from everlast.adversary_sim.audit.variants import VARIANTS

__all__ = ["ATTACKS", "DEFAULT_ATTACKS", "GAMES", "VARIANTS", "run_audit"]
