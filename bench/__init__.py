"""Benchmarks: each prints one JSON object of figures measured against a baseline in the same run
(ratios, not absolute timings). Not tests: nothing here asserts a speed."""
