"""Paired comparison of two or more systems on the same queries.

:class:`Comparison` is the model of ``gapbench compare --json`` (:class:`gapbench.schemas.Comparison`: each system's
means and CIs, the paired tests, the re-score checks), with the per-query :class:`Results` it was computed from kept
beside it in memory."""

from __future__ import annotations

import itertools
import os
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Sequence

from pydantic import Field, PrivateAttr

from ..contract import Alpha, Options, Permutations, Seed
from ..errors import ConfigError, GapbenchError
from ..schemas.comparison import Comparison as ComparisonModel
from ..schemas.comparison import PairTest, RescoreCheck
from ..schemas.run import RunResults
from .evaluation import Results, evaluate, format_table
from .stats import holm, paired_t_test, randomization_test

__all__ = ["Comparison", "CompareOptions", "PairTest", "compare", "compare_run_dirs"]


class CompareOptions(Options):
    """The settings of a comparison's paired tests, checked when made (an :class:`~gapbench.errors.OptionsError`
    names the field, in the words every options class uses); :func:`compare` and :func:`compare_run_dirs` build one
    from their keywords."""

    alpha: Alpha = Field(0.05, description="A difference is significant when its Holm-corrected p is below this.")
    n_permutations: Permutations = Field(10_000, description="Sign flips of each paired randomization test.")
    seed: Seed = Field(0, description="Seed of the sign flips (and of the bootstrap of runs evaluated here).")


class Comparison(ComparisonModel):
    """Means, CIs and Holm-corrected paired tests over every pair of systems, per measure: the file's model, with the
    per-query :class:`Results` of each system in ``results`` (in memory only; a comparison read from a file has
    none)."""

    _results: tuple[Results, ...] = PrivateAttr(default=())

    @classmethod
    def of(cls, results: Sequence[Results], tests: Sequence[PairTest], alpha: float,
           checks: Sequence[RescoreCheck] = ()) -> "Comparison":
        made = cls(systems=[RunResults.model_validate(r.to_dict()) for r in results], tests=tuple(tests),
                   alpha=alpha, correction="holm", checks=tuple(checks))
        made._results = tuple(results)
        return made

    @property
    def results(self) -> tuple[Results, ...]:
        return self._results

    @property
    def names(self) -> list[str]:
        """The systems' names, in the order compared."""
        return [s.system for s in self.systems]

    def test(self, measure: str, a: str, b: str) -> PairTest:
        for t in self.tests:
            if t.measure == measure and {t.a, t.b} == {a, b}:
                return t
        raise GapbenchError(f"no test of {a!r} vs {b!r} on {measure!r}; systems: {', '.join(self.names)}.")

    def to_dict(self) -> dict:
        """The JSON document of ``gapbench compare --json``."""
        return self.model_dump(mode="json", exclude_unset=True)

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame([t.model_dump() for t in self.tests])

    def __str__(self) -> str:
        measures = list(self.systems[0].measures)  # measure -> mean, in the order evaluated
        letters = {r.system: chr(ord("a") + i) for i, r in enumerate(self.systems)}
        rows = []
        for r in self.systems:
            row = [f"({letters[r.system]}) {r.system}"]
            for m in measures:
                better = [
                    letters[o.system]
                    for o in self.systems
                    if o.system != r.system
                    and self.test(m, r.system, o.system).significant(self.alpha)
                    and r.measures[m] > o.measures[m]
                ]
                lo, hi = (r.ci95 or {}).get(m, (float("nan"), float("nan")))
                row.append(f"{r.measures[m]:.4f} [{lo:.3f},{hi:.3f}]{''.join(better)}")
            rows.append(row)
        n = self.systems[0].n_queries
        note = (
            f"{n} queries. A letter marks a system significantly better than that system "
            f"(paired randomization test, Holm-corrected over {len(self.tests) // max(1, len(measures))} comparisons, "
            f"alpha={self.alpha})."
        )
        from ..schemas.comparison import rescore_summary

        return "\n".join([format_table(["system", *measures], rows), note, *rescore_summary(self.checks)])


def compare(
    items: Sequence[Results] | Sequence,
    qrels=None,
    measures: Iterable[str] | None = None,
    *,
    n_permutations: int = 10_000,
    alpha: float = 0.05,
    seed: int = 0,
) -> Comparison:
    """Compare systems: pass :class:`Results` or :func:`gapbench.run` results (same task), or runs together with
    ``qrels``.

    >>> cmp = compare([gapbench.run(task, "bm25"), gapbench.run(task, "dense")])  # doctest: +SKIP
    >>> cmp = compare([run_a, run_b], qrels, ["nDCG@10"])  # doctest: +SKIP
    """
    CompareOptions(alpha=alpha, n_permutations=n_permutations, seed=seed)  # refused before any work
    if len(items) < 2:
        raise GapbenchError("compare needs at least two systems.")
    results: list[Results] = []
    for item in items:
        if isinstance(item, Results):
            results.append(item)
        elif isinstance(getattr(item, "results", None), Results):  # a RunResult, what gapbench.run returns
            results.append(item.results)
        else:
            if qrels is None:
                raise GapbenchError("compare was given runs without qrels; pass qrels=... or Results objects.")
            results.append(evaluate(item, qrels, measures, seed=seed))
    names = [r.system for r in results]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise GapbenchError(f"two systems are both named {dup!r}; give each run a distinct name.")
    base_q = results[0].query_ids
    base_m = results[0].measures
    for r in results[1:]:
        if set(r.query_ids) != set(base_q):
            raise GapbenchError(
                f"{r.system!r} was evaluated on {r.n_queries} queries and {results[0].system!r} on "
                f"{results[0].n_queries}; paired tests need the same queries (same task and qrels)."
            )
        if r.measures != base_m:
            raise GapbenchError(f"{r.system!r} has measures {r.measures}, {results[0].system!r} has {base_m}.")
    tests: list[PairTest] = []
    for m in base_m:
        raw = []
        for a, b in itertools.combinations(results, 2):
            va = [a.per_query[m][q] for q in base_q]
            vb = [b.per_query[m][q] for q in base_q]
            raw.append((a, b, a.means[m] - b.means[m], randomization_test(va, vb, n_permutations, seed), paired_t_test(va, vb)))
        adj_r = holm([x[3] for x in raw])
        adj_t = holm([x[4] if x[4] == x[4] else 1.0 for x in raw])
        for (a, b, delta, pr, pt), hr, ht in zip(raw, adj_r, adj_t):
            tests.append(PairTest(measure=m, a=a.system, b=b.system, delta=delta, p_randomization=pr, p_ttest=pt,
                                  p_randomization_holm=hr, p_ttest_holm=ht))
    return Comparison.of(results, tests, alpha)


def compare_run_dirs(
    run_dirs: Sequence[str | os.PathLike],
    measures: Sequence[str] | None = None,
    *,
    n_permutations: int = 10_000,
    alpha: float = 0.05,
    seed: int = 0,
    rescore: str = "auto",
    data: Sequence[str] = (),
) -> Comparison:
    """Compare stored run directories of one task, read, checked and re-scored (``rescore``, see
    :mod:`gapbench.evaluation.rescore`) as ``gapbench regress`` does.

    A local task is its content (:mod:`gapbench.identity`): runs of the same BEIR folder at two paths are one task,
    re-scored from the data found where a manifest recorded it or given in ``data`` (folders or task strings).
    Systems stored under the same name (one retriever with other options) are told apart by their folder's name.
    """
    from .rescore import Rescorer, check_mode
    from ..identity import identity_of
    from ..store import load_results

    CompareOptions(alpha=alpha, n_permutations=n_permutations, seed=seed)  # refused before any run directory is read
    check_mode(rescore)
    dirs = [Path(d) for d in run_dirs]
    if len(dirs) < 2:
        shown = f" (got only {dirs[0]})" if dirs else ""
        raise ConfigError(f"compare needs two or more run directories{shown}; add another one made by "
                          "`gapbench run TASK -r RETRIEVER --output DIR`.")
    for i, d in enumerate(dirs):
        for e in dirs[:i]:
            if os.path.lexists(d) and os.path.lexists(e) and os.path.realpath(d) == os.path.realpath(e):
                raise ConfigError(f"{d} is given twice (also as {e}); compare different run directories.")
    loaded = [(d, load_results(d)) for d in dirs]
    ids = [identity_of(d, r, check_name=False) for d, r in loaded]
    first_dir, first = loaded[0]
    for (d, r), ident in zip(loaded[1:], ids[1:]):
        if ident.key != ids[0].key:
            raise ConfigError(f"{d} holds task {ident.label!r} and {first_dir} holds task {ids[0].label!r}; compare "
                              "run directories of one task" + (" (a local task is its data: the same corpus, queries "
                              "and qrels)" if ident.local or ids[0].local else "") + ".")
    if measures is not None:
        wanted = list(measures)
        if not wanted or not all(isinstance(m, str) and m for m in wanted):
            raise ConfigError(f"measures is {wanted!r}; name stored measures, e.g. ['nDCG@10', 'R@100'], or leave "
                              "measures out (None) to compare every measure the run directories share.")
        twice = sorted({m for m in wanted if wanted.count(m) > 1})
        if twice:
            raise ConfigError(f"measures lists {twice[0]} twice; name each measure once.")
        for d, r in loaded:
            missing = [m for m in wanted if m not in r.measures]
            if missing:
                raise ConfigError(f"{d}: {r.system!r} has no stored {missing[0]} (stored: {', '.join(r.measures)}); "
                                  "pick stored measures, or re-run with them.")
    else:
        wanted = [m for m in first.measures if all(m in r.measures for _, r in loaded)]
        if not wanted:
            raise ConfigError(f"the run directories share no measure ({first_dir} stores "
                              f"{', '.join(first.measures)}); re-run them with the same measures.")
    qids = set(first.query_ids)
    for d, r in loaded[1:]:
        if set(r.query_ids) != qids:
            only_a, only_b = sorted(qids - set(r.query_ids)), sorted(set(r.query_ids) - qids)
            raise ConfigError(f"{first_dir} and {d} scored different queries ({len(only_a)} only in the first, e.g. "
                              f"{only_a[:3]}; {len(only_b)} only in the second, e.g. {only_b[:3]}); paired tests need "
                              "runs of the same task revision and queries.")
    rescorer = Rescorer(rescore, data)
    check = rescorer.check(ids[0].label or str(first_dir), loaded, wanted)
    unused_data(rescorer)
    names = [r.system for _, r in loaded]
    results = [replace(r, system=f"{r.system} ({_folder_label(d, dirs)})" if names.count(r.system) > 1 else r.system,
                       measures=tuple(wanted)) for d, r in loaded]
    return compare(results, n_permutations=n_permutations, alpha=alpha, seed=seed).model_copy(update={"checks": (check,)})


def unused_data(rescorer) -> None:
    """Refuse ``--data`` that no run directory was made on: a wrong folder must not pass unnoticed."""
    unused = rescorer.unused_data()
    if unused:
        raise ConfigError(f"data {unused[0]} holds data that none of the run directories was made on (its corpus, "
                          "queries or qrels differ); give the folder the runs were made on, or leave it out of data.")


def _folder_label(d: Path, dirs: Sequence[Path]) -> str:
    """The shortest tail of ``d``'s path that no other directory shares (base/wknow vs cand/wknow)."""
    parts = d.parts
    for n in range(1, len(parts) + 1):
        tail = parts[-n:]
        if all(e.parts[-n:] != tail for e in dirs if e != d):
            return str(Path(*tail))
    return str(d)
