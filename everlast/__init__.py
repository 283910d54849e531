"""everlast: private everlasting prediction (GenericBBL, Naor-Nissim-Stemmer-Yan 2023) as a service.

The installed import names live under this one namespace, so that everlast installs beside any other
distribution (python-daemon's top-level ``daemon`` module, for one). In the repository the
subpackages are the top-level folders (``engine/``, ``daemon/``, ``adversary_sim/``, ``cli/``,
``peers/``); pyproject.toml's ``package-dir`` maps each to its installed name (no symbolic link), and
the wheel ships them as ``everlast.engine`` and so on.
"""
