"""Analyses that say where and why a retriever misses: gap, signals, coverage and ARGUS. Each starts from the same
prepared task (:func:`gapbench.runner.prepare`)."""
