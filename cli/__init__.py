"""The ``everlast`` command line: thin wrappers that parse flags, call the engine (or daemon),
print one JSON object with ``--json`` and human-readable text otherwise. Progress and logs go to
stderr so stdout stays machine-readable."""
