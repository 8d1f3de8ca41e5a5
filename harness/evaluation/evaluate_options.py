"""The settings of :func:`gapbench.evaluate` besides the run, the qrels and the measures: :class:`EvaluateOptions`,
on the contract's shared types, so that ``seed=-1`` or ``n_resamples=0`` is refused when ``evaluate`` is called, in the
words every options class uses, not later when a confidence interval is first read."""

from __future__ import annotations

from pydantic import Field

from ..contract import Depth, OptionalResamples, Options, Seed


class EvaluateOptions(Options):
    """How :func:`gapbench.evaluate` resamples and what it knows of the run. Example::

        EvaluateOptions(n_resamples=2000, seed=1, depth=100)
    """

    verb = "gapbench.evaluate"  # named by the error of a setting it does not have

    # 0: the means only (a caller that never reads a CI); reading one then is an error
    n_resamples: OptionalResamples = Field(1000, description="Bootstrap resamples of the queries for the 95% "
                                                             "CIs; 0: the means only.")
    seed: Seed = Field(0, description="Seed of the bootstrap.")
    depth: Depth | None = Field(None, description="The k the run was cut at, where known: a measure that reads "
                                                     "deeper is named in the results' notes.")
