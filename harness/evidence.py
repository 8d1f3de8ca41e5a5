"""The one rule for thin evidence: when a statistic is too weakly supported to be shown as a number.

A separation (AUC) of 1.000 computed from one weak retrieval among 43 queries, or one whose 95% interval is as wide
as its distance from chance, reads like a finding but is not one. Every place that shows such a statistic (the
signals analysis and its gate, the leaderboard's weak-signal AUC, the gap report that shows signals.json) asks
:func:`class_shortfall` and :func:`reaches_chance` here, so the thresholds exist once. Where the statistic is held
back, the file holds ``null`` with the reason and the counts, and the page shows the reason.

>>> class_shortfall(1, 43)
'too few weak retrievals (1 of 43)'
>>> class_shortfall(20, 43) is None
True
>>> reaches_chance(0.62, 0.45, 0.80)
True
>>> separation_evidence(43, 1, 1.0, (1.0, 1.0))
'too few weak retrievals (1 of 43)'
"""

from __future__ import annotations

from collections.abc import Sequence

# fewer weak or good retrievals than this among all queries: a separation and its interval rest on a handful of them
MIN_PER_CLASS = 10
# fewer weak or good retrievals than this on a gate's held-out split: its catch and false-alarm rates are a few
# queries each (half the queries go to calibration, so half the bar above)
HELD_OUT_MIN_PER_CLASS = 5
# a held-out Youden J (catch rate - false-alarm rate) below this is near chance (0)
J_NEAR_ZERO = 0.1
# the separation max(AUC, 1 - AUC) of a signal that tells nothing
CHANCE = 0.5

CLASSES = ("weak retrieval", "good retrieval")


def plural(word: str) -> str:
    """The plural of a class's name (``miss``: ``misses``, ``hit``: ``hits``)."""
    return word + ("es" if word.endswith(("s", "sh", "ch")) else "s")


def too_few(count: int, minimum: int = MIN_PER_CLASS) -> bool:
    """Whether a class of ``count`` cases is too small for a statistic that compares it with the other class."""
    return count < minimum


def class_shortfall(n_positive: int, n: int, classes: Sequence[str] = CLASSES,
                    minimum: int = MIN_PER_CLASS) -> str | None:
    """Why a statistic over ``n`` cases, ``n_positive`` of them in the first class, rests on too few of a class
    (fewer than ``minimum``), as e.g. ``"too few weak retrievals (1 of 43)"``; None when both classes have enough.

    ``classes``: the singular names of the positive and the negative class."""
    counts = ((n_positive, classes[0]), (n - n_positive, classes[1]))
    short = [(c, name) for c, name in counts if too_few(c, minimum)]
    if not short:
        return None
    parts = [f"{plural(name)} ({c:,} of {n:,})" for c, name in short]
    return "too few " + " and ".join(parts)


def reaches_chance(estimate: float, lo: float, hi: float, chance: float = CHANCE) -> bool:
    """Whether an interval [lo, hi] around a separation ``estimate`` is at least as wide as the estimate's distance
    from chance: these queries cannot tell it from no signal at all."""
    return hi - lo >= estimate - chance


def interval_reason(estimate: float, lo: float, hi: float, chance: float = CHANCE) -> str | None:
    """The reason :func:`reaches_chance` gives in words, or None when the interval is narrower than the effect."""
    if not reaches_chance(estimate, lo, hi, chance):
        return None
    return (f"its 95% interval {lo:.3f}-{hi:.3f} is as wide as its distance from chance ({estimate:.3f} - "
            f"{chance} = {estimate - chance:.3f})")


def separation_evidence(n: int, n_positive: int, estimate: float | None,
                        ci: Sequence[float | None] | None, classes: Sequence[str] = CLASSES,
                        minimum: int = MIN_PER_CLASS) -> str | None:
    """Why a separation over ``n`` cases (``n_positive`` in the first class) with its 95% interval ``ci`` is not to
    be shown as a number, or None when it may be: too few cases of a class first, then an interval as wide as the
    distance from chance (an interval with a missing end is not judged on its width)."""
    short = class_shortfall(n_positive, n, classes, minimum)
    if short is not None:
        return short
    if estimate is None or ci is None or ci[0] is None or ci[1] is None:
        return None
    return interval_reason(estimate, float(ci[0]), float(ci[1]))
