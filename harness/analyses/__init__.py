"""Analyses that say where and why a retriever misses: gap, signals, coverage, ARGUS and OBLIQ build. Each starts from
the same prepared task (:func:`gapbench.pipeline.prepare`) and registers as a plugin through the entry-point group
``gapbench.analyses`` (:mod:`gapbench.plugins`, declarations in :mod:`gapbench.analysis_plugins`): the core imports
none of them."""
