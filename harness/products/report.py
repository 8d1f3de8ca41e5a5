"""Gap reports per task: one page that says how well each system ranks, and where and why it misses.

``build_report(task, run_dirs, analyses)`` reads run directories (made by ``gapbench run ... --output DIR``) of one task
and the analysis outputs found in the ``analyses`` directories, and returns a :class:`Report`; ``Report.save(out)``
writes three renderings of the same content::

    report = build_report("impliret/multispeaker/wknow", ["runs/bm25", "runs/lucene"], analyses=["gap/"])
    report.save("report/")   # report.html (self-contained), report.md + PNGs beside it, report.json

The HTML page makes no outside request: CSS is inline, figures are base64 PNG ``data:`` URIs, there is no script.

Sections: headline measures (means with 95% bootstrap CIs, ``Results.ci``) and Holm-corrected paired tests between
systems (:func:`gapbench.evaluation.comparison.compare`); per-query distributions of the main measure (box plot, histogram,
summary table) and per-query win/tie/loss counts for every pair of systems; then one section per analysis found.

Analyses. An analysis directory holds ``<kind>.json`` files (keys ``kind``, ``task``, ``version`` and the content) and
the PNGs the analysis drew. A directory given with ``--analyses`` is searched together with its immediate
sub-directories; JSON files without a ``kind`` (run directories' own files) are passed over, except ``gap.json``, which
early releases wrote without one. Every file of a kind :mod:`gapbench.schemas` models (``gap``, ``coverage``,
``signals``, ``argus_audit``, ``argus_probe``, ``argus_compare``, and its other kinds such as ``regress``) is validated
against its model when read, whatever its task (:func:`gapbench.schemas.validate_analysis`): a missing, mistyped or
unknown field is a :class:`~gapbench.errors.DataFormatError` naming the file and the key. A kind without a model passes
unchecked.

The gap has its own section (bounds, pool scaling, its PNG). Every other kind, modelled or not, is rendered generically
from its structure, so a kind this gapbench has no model for, or a model that grows, still renders:

- scalar fields (nested mappings flattened to dotted keys) as a key/value table;
- a list of records, or a mapping of name -> record, as a table (per-signal AUCs, coverage clusters, ARGUS entities);
- a mapping of name -> {part -> record} as one table per part, a row per name (ARGUS variants -> means, deltas);
- ``before``/``after`` mappings of scalars as a before/after/delta table;
- a list of numbers, or a mapping of 20 or more names to numbers (a value per query), as a histogram; a mapping of
  name -> list of numbers, or records that carry a list of numbers each, as box plots (ARGUS ranks per entity);
- the analysis's PNGs: those its JSON names, those whose name starts with the kind, or all PNGs of a directory that
  holds only this analysis.

Analyses of another task are left out and listed as ignored. The report lists the known analyses that were not run.

report.json (``version`` 1)::

    {"kind": "report", "task": str, "version": 1, "gapbench_version": str,
     "main_measure": str, "measures": [str], "alpha": float, "n_permutations": int, "seed": int,
     "systems": [{"system", "run_dir", "n_queries", "n_missing", "n_dropped", "n_unjudged",
                  "measures": {m: mean}, "ci95": {m: [lo, hi]}}],
     "tests": [{"measure", "a", "b", "delta", "p_randomization", "p_ttest", "p_randomization_holm", "p_ttest_holm",
                "significant"}],
     "per_query": {"measure": str,
                   "distribution": {system: {"n", "mean", "median", "q1", "q3", "min", "max", "share_zero"}},
                   "win_tie_loss": [{"measure", "a", "b", "wins", "ties", "losses"}]},
     "analyses": [{"kind", "title", "source", "schema": "gap" | "generic", "data": {...the file's content...},
                   "figures": [file names]}],
     "not_run": [kind], "ignored": [{"source", "reason"}],
     "figures": [file names]}
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, Union

from ..errors import ConfigError, DataFormatError, GapbenchError
from ..files import output_folder, pyplot, write_bytes_atomic, write_text_atomic
from ..formats import StrictJSONError, parse_json_strict
from ..schemas import validate_analysis
from ..tables import Table, md_cell

REPORT_VERSION = 1

# the analyses a full report carries, in page order: kind -> (title, what it shows)
KNOWN_ANALYSES: dict[str, tuple[str, str]] = {
    "gap": (
        "Retrieval-verification gap",
        "An LLM verifier reranks the pooled candidates of the retrievers (a lower bound of retrieve-then-verify) and the "
        "same pool with every missing gold document infused (an upper bound). The gap is the gold-infused verifier "
        "minus the best retriever; the pool-scaling curve shows both as the pool grows.",
    ),
    "coverage": (
        "Coverage of the corpus by the query set",
        "How the queries and their gold documents cover the corpus, cluster by cluster.",
    ),
    "argus_audit": (
        "ARGUS audit: retrieval-proneness scores",
        "The distribution of retrieval-proneness scores (RPS) over the task's queries.",
    ),
    "argus_compare": (
        "ARGUS before and after",
        "The task's measures before and after the ARGUS intervention.",
    ),
    "signals": (
        "Weak-retrieval signals and the gate",
        "How well each query-level signal predicts a retrieval failure (AUC), and the gate built from them.",
    ),
}

_META_KEYS = ("kind", "task", "version")
_TIE = 1e-12


# ---------------------------------------------------------------- the document model


@dataclass
class Figure:
    name: str  # file name of the PNG beside report.md
    png: bytes
    caption: str = ""


Block = Union[str, Table, Figure]


@dataclass
class Section:
    id: str
    title: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Report:
    """A rendered report: sections (for HTML and Markdown) and ``data`` (report.json)."""

    task: str
    sections: list[Section]
    data: dict

    @property
    def figures(self) -> list[Figure]:
        return [b for s in self.sections for b in s.blocks if isinstance(b, Figure)]

    def to_dict(self) -> dict:
        return {**self.data, "figures": [f.name for f in self.figures]}

    def to_markdown(self) -> str:
        return _markdown(self)

    def to_html(self) -> str:
        return _html(self)

    def save(self, out_dir: str | os.PathLike) -> dict[str, Path]:
        """Write report.html, report.md (PNGs beside it) and report.json into ``out_dir``, each atomically."""
        out = Path(out_dir)
        if out.exists() and not out.is_dir():
            raise ConfigError(f"{out}: the report output must be a directory, and this is a file.")
        output_folder(out)
        paths: dict[str, Path] = {}
        for fig in self.figures:
            write_bytes_atomic(out / fig.name, fig.png)
        paths["html"] = write_text_atomic(out / "report.html", self.to_html())
        paths["md"] = write_text_atomic(out / "report.md", self.to_markdown())
        paths["json"] = write_text_atomic(out / "report.json", json.dumps(self.to_dict(), indent=2))
        return paths


# ---------------------------------------------------------------- analyses on disk


@dataclass
class Analysis:
    kind: str
    source: Path
    data: dict
    pngs: list[Path]


def find_analyses(dirs: Iterable[str | os.PathLike], task: str,
                  aliases: Iterable[str] = ()) -> tuple[list[Analysis], list[dict]]:
    """The analyses of ``task`` under ``dirs`` (each searched with its immediate sub-directories), and the ignored ones;
    ``aliases`` are other names of the same task (a local folder's path on the machine its runs were made on)."""
    names = {task, *aliases}
    found: list[tuple[str, Path, dict]] = []
    ignored: list[dict] = []
    seen: set[Path] = set()
    for d in dirs:
        d = Path(d)
        if not d.exists():
            raise ConfigError(f"{d}: analysis directory not found; pass the --output folder of an analysis.")
        files = [d] if d.is_file() else sorted(d.glob("*.json")) + sorted(d.glob("*/*.json"))
        for path in files:
            real = path.resolve()
            if real in seen or path.name.startswith("."):
                continue
            seen.add(real)
            kind, data = _read_analysis(path)
            if kind is None:
                continue
            if data.get("task") is None:  # a saved probe model, a dataset manifest: files of no task's analysis
                ignored.append({"source": str(path), "reason": f"kind {kind!r} with no task: not an analysis of a task"})
                continue
            if data.get("task") not in names:
                ignored.append({"source": str(path), "reason": f"for task {data.get('task')!r}, not {task!r}"})
                continue
            found.append((kind, path, data))
    per_dir: dict[Path, int] = {}
    for _, path, _ in found:
        per_dir[path.parent] = per_dir.get(path.parent, 0) + 1
    out = []
    for kind, path, data in found:
        named = {Path(s).name for s in _strings(data) if s.lower().endswith(".png")}
        pngs = [
            p for p in sorted(path.parent.glob("*.png"))
            if p.name in named or p.stem.startswith(kind) or (per_dir[path.parent] == 1 and kind != "gap")
        ]
        if kind == "gap":
            pngs = [p for p in sorted(path.parent.glob("*.png")) if p.name == "pool_scaling.png" or p.name in named]
        out.append(Analysis(kind, path, data, pngs))
    order = list(KNOWN_ANALYSES)
    out.sort(key=lambda a: (order.index(a.kind) if a.kind in order else len(order), a.kind, str(a.source)))
    return out, ignored


def _read_analysis(path: Path) -> tuple[str | None, dict]:
    is_gap = path.name == "gap.json"
    try:  # the strict reader of every file gapbench writes and reads back: no NaN, no key twice
        data = parse_json_strict(path.read_bytes(), max_depth=64)
    except StrictJSONError as exc:
        if is_gap or path.stem in KNOWN_ANALYSES:
            raise DataFormatError(f"{str(exc).rstrip('.')}; re-run the analysis to rewrite it.", path=path,
                                  line=exc.line) from None
        return None, {}
    if not isinstance(data, dict):
        if is_gap:
            raise DataFormatError(f"expected a JSON object, found {type(data).__name__}.", path=path)
        return None, {}
    kind = data.get("kind")
    if kind is None and is_gap:
        kind = "gap"
    if not isinstance(kind, str) or kind == "report":
        return None, {}
    return kind, validate_analysis(kind, data, path)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


# ---------------------------------------------------------------- building


def build_report(
    task: str,
    run_dirs: Sequence[str | os.PathLike],
    analyses: Sequence[str | os.PathLike] = (),
    *,
    measure: str | None = None,
    alpha: float = 0.05,
    n_permutations: int = 10_000,
    seed: int = 0,
) -> Report:
    """Read run directories and analyses of one task into a :class:`Report` (nothing is written)."""
    from .. import __version__
    from ..evaluation.comparison import compare

    if not run_dirs:
        raise ConfigError("a report needs at least one run directory (made by `gapbench run TASK -r NAME -o DIR`).")
    if not 0 < alpha < 1:
        raise ConfigError(f"alpha must be between 0 and 1, got {alpha}.")
    results, measures, main, aliases = _comparable_runs(task, run_dirs, measure)
    res_list = [r for _, r in results]
    cmp = compare(res_list, alpha=alpha, n_permutations=n_permutations, seed=seed) if len(res_list) > 1 else None

    data: dict[str, Any] = {
        "kind": "report", "task": task, "version": REPORT_VERSION, "gapbench_version": __version__,
        "main_measure": main, "measures": measures, "alpha": alpha, "n_permutations": n_permutations, "seed": seed,
        "systems": [{**r.to_dict(), "run_dir": str(d)} for d, r in results],
        "tests": [{**t.__dict__, "significant": t.significant(alpha)} for t in (cmp.tests if cmp else ())],
    }
    sections = [_headline_section(res_list, cmp, measures, alpha, n_permutations)]
    per_query, section = _per_query_section(res_list, main, measures)
    data["per_query"] = per_query
    sections.append(section)

    found, ignored = find_analyses(analyses, task, aliases)
    analysis_sections, data["analyses"] = _analysis_sections(found)
    sections += analysis_sections
    data["ignored"] = ignored
    run_kinds = {a.kind for a in found}
    data["not_run"] = [k for k in KNOWN_ANALYSES if k not in run_kinds]
    sections.append(_status_section(found, data["not_run"], ignored, analyses))
    _name_figures(sections)
    for entry, sec in zip(data["analyses"], analysis_sections):
        entry["figures"] = [b.name for b in sec.blocks if isinstance(b, Figure)]
    return Report(task, sections, data)


def _comparable_runs(task: str, run_dirs: Sequence[str | os.PathLike],
                     measure: str | None) -> tuple[list[tuple[Path, Any]], list[str], str, list[str]]:
    """The runs of ``task`` with unique system names, cut to their shared measures and checked to share queries.

    A local task is its data (:mod:`gapbench.identity`): a run made on the same folder at another path is a run of
    ``task``, re-scored from the data ``task`` names here. Returns (directory, results) pairs, the shared measures,
    the main one (``measure``, or the first shared) and the other names the runs give the task.
    """
    from dataclasses import replace

    from ..identity import identity_of
    from ..store import load_results

    results = []
    names: dict[str, int] = {}
    local = _LocalTask(task)
    for d in run_dirs:
        res = load_results(d)
        ident = identity_of(d, res) if local.key() else None
        if ident is not None and ident.key != local.key():
            raise ConfigError(
                f"{d}: this run directory was made on other data ({ident.label}) than the task {task!r} holds here "
                f"({local.key()}: its corpus, queries or qrels differ); pass run directories made on this data, or "
                "re-run them on it."
            )
        if res.task and res.task != task and not local.key():
            raise ConfigError(
                f"{d}: this run directory is for task {res.task!r}, and the report is for {task!r}; "
                f"pass run directories of {task!r} only, or report on {res.task!r}."
            )
        names[res.system] = names.get(res.system, 0) + 1
        results.append((Path(d), res))
    # two runs of the same retriever (other options) are told apart by their directory
    results = [(d, replace(r, system=f"{r.system} ({d.name})") if names[r.system] > 1 else r) for d, r in results]
    measures = [m for m in results[0][1].measures if all(m in r.measures for _, r in results)]
    if not measures:
        raise ConfigError("the run directories share no measure; re-run them with the same --measures.")
    if measure is not None and measure not in measures:
        raise ConfigError(f"measure {measure!r} is not stored in every run directory; shared: {', '.join(measures)}.")
    results = [(d, replace(r, measures=tuple(measures))) for d, r in results]
    qsets = {frozenset(r.query_ids) for _, r in results}
    if len(qsets) > 1:
        a, b = results[0], next(x for x in results if frozenset(x[1].query_ids) != frozenset(results[0][1].query_ids))
        raise ConfigError(
            f"{a[0]} has {a[1].n_queries} evaluated queries and {b[0]} has {b[1].n_queries}; per-query comparisons "
            "need runs evaluated on the same queries (same task and qrels)."
        )
    local.rescore(results, measures)
    return results, measures, measure or measures[0], sorted({r.task for _, r in results if r.task} - {task})


class _LocalTask:
    """The task a report is for, when it is local data: its identity key (its data loaded once) and the re-scoring
    of its runs from that data."""

    def __init__(self, task: str) -> None:
        self.task = task
        self._key: str | None = None

    def key(self) -> str:
        if self._key is None:
            from ..identity import data_key
            from ..task import get_task

            try:
                obj = get_task(self.task)
            except GapbenchError:
                obj = None  # not a task here: runs must name it exactly, as before
            self._key = data_key(obj.load()) if obj is not None and obj.revision == "local" else ""
        return self._key

    def rescore(self, results: Sequence[tuple[Path, Any]], measures: Sequence[str]) -> None:
        """Runs of a local task are re-scored from its data here (their run files against its qrels)."""
        if not self.key():
            return
        from ..evaluation.rescore import Rescorer

        Rescorer("auto", [self.task]).check(self.task, [(d, r) for d, r in results], list(measures))


def _analysis_sections(found: Sequence[Any]) -> tuple[list[Section], list[dict]]:
    """One section per analysis found (ids numbered when a kind repeats), and its entry of report.json.

    Each entry's ``figures`` is filled in by the caller once the figures are numbered across the report.
    """
    sections, entries = [], []
    counts: dict[str, int] = {}
    for a in found:
        counts[a.kind] = counts.get(a.kind, 0) + 1
        sec_id = f"{a.kind}-{counts[a.kind]}" if counts[a.kind] > 1 else a.kind
        section = _gap_section(a, sec_id) if a.kind == "gap" else _generic_section(a, sec_id)
        sections.append(section)
        entries.append({"kind": a.kind, "title": section.title, "source": str(a.source),
                        "schema": "gap" if a.kind == "gap" else "generic", "data": a.data, "figures": []})
    return sections, entries


def _name_figures(sections: list[Section]) -> None:
    n = 0
    for s in sections:
        for b in s.blocks:
            if isinstance(b, Figure):
                n += 1
                b.name = f"fig{n:02d}-{_slug(s.id)}-{_slug(b.name)}.png"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")[:40] or "x"


# ---------------------------------------------------------------- formatting helpers


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e5):
            return f"{v:.3g}"
        return f"{v:.4f}"
    if isinstance(v, list):
        return f"[{len(v)} values]" if len(v) > 6 else ", ".join(_fmt(x) for x in v)
    if isinstance(v, Mapping):
        return f"{{{len(v)} entries}}"
    return str(v)


def _p(v: float) -> str:
    return "<0.0001" if v < 1e-4 else f"{v:.4f}"


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# ---------------------------------------------------------------- headline and per-query


def _headline_section(results, cmp, measures, alpha, n_permutations) -> Section:
    sec = Section("headline", "Headline measures")
    letters = {r.system: chr(ord("a") + i) for i, r in enumerate(results)}
    r0 = results[0]
    notes = [f"{r0.n_queries} queries"]
    if r0.n_dropped:
        notes.append(f"{r0.n_dropped} queries without a positive judgement dropped")
    for r in results:
        if r.n_missing:
            notes.append(f"{r.system}: {r.n_missing} judged queries absent from the run scored 0")
    sec.blocks.append("; ".join(notes) + ". Means with 95% bootstrap confidence intervals (queries resampled).")
    rows, sup = [], {}
    for i, r in enumerate(results):
        row = [f"({letters[r.system]}) {r.system}"]
        for j, m in enumerate(measures):
            row.append(f"{r.means[m]:.4f} [{r.ci[m][0]:.4f}, {r.ci[m][1]:.4f}]")
            if cmp is not None:
                better = [letters[o.system] for o in results if o.system != r.system
                          and cmp.test(m, r.system, o.system).significant(alpha) and r.means[m] > o.means[m]]
                if better:
                    sup[(i, j + 1)] = "".join(better)
        rows.append(row)
    caption = "Mean [95% CI]"
    if cmp is not None:
        caption += (f"; a superscript letter marks a system significantly better than that system (paired "
                    f"randomization test, {n_permutations} sign flips, Holm-corrected per measure, alpha={alpha}).")
    sec.blocks.append(Table(["system", *measures], rows, caption=caption, sup=sup))
    if cmp is None:
        sec.blocks.append("One system only: no significance tests (pass two or more run directories).")
        return sec
    rows = [[t.measure, f"{t.a} vs {t.b}", f"{t.delta:+.4f}", _p(t.p_randomization), _p(t.p_randomization_holm),
             _p(t.p_ttest_holm), "yes" if t.significant(alpha) else "no"] for t in cmp.tests]
    sec.blocks.append(Table(["measure", "pair", "delta (a - b)", "p randomization", "p Holm", "p t-test Holm",
                             f"significant at {alpha}"], rows, caption="Paired tests between systems"))
    return sec


def _distribution(values: Sequence[float]) -> dict:
    import numpy as np

    v = np.asarray(values, dtype=float)
    q1, med, q3 = (float(x) for x in np.percentile(v, [25, 50, 75]))
    return {"n": int(v.size), "mean": float(v.mean()), "median": med, "q1": q1, "q3": q3, "min": float(v.min()),
            "max": float(v.max()), "share_zero": float(np.mean(v == 0.0))}


def _per_query_section(results, main, measures) -> tuple[dict, Section]:
    import itertools

    sec = Section("per-query", f"Per-query distribution ({main})")
    qids = results[0].query_ids
    dist = {r.system: _distribution([r.per_query[main][q] for q in qids]) for r in results}
    values = {r.system: [r.per_query[main][q] for q in qids] for r in results}
    sec.blocks.append(_boxplot(values, main, f"{main} per query", "box-plot"))
    sec.blocks.append(_histograms(values, main, f"Histogram of {main} per query", "histogram"))
    sec.blocks.append(Table(
        ["system", "queries", "mean", "median", "q1", "q3", "min", "max", "share of 0"],
        [[s, str(d["n"]), *(f"{d[k]:.4f}" for k in ("mean", "median", "q1", "q3", "min", "max")), f"{d['share_zero']:.1%}"]
         for s, d in dist.items()],
        caption=f"Distribution of {main} over the {len(qids)} queries",
    ))
    wtl = []
    for a, b in itertools.combinations(results, 2):
        for m in measures:
            w = t = l = 0
            for q in qids:
                diff = a.per_query[m][q] - b.per_query[m][q]
                if abs(diff) <= _TIE:
                    t += 1
                elif diff > 0:
                    w += 1
                else:
                    l += 1
            wtl.append({"measure": m, "a": a.system, "b": b.system, "wins": w, "ties": t, "losses": l})
    if wtl:
        sec.blocks.append(Table(
            ["measure", "a", "b", "a wins", "ties", "a loses"],
            [[x["measure"], x["a"], x["b"], str(x["wins"]), str(x["ties"]), str(x["losses"])] for x in wtl],
            caption="Per-query wins, ties and losses of a against b (a tie: equal values)",
        ))
    else:
        sec.blocks.append("One system only: no per-query wins and losses.")
    return {"measure": main, "distribution": dist, "win_tie_loss": wtl}, sec


# ---------------------------------------------------------------- plots (matplotlib, Agg)


def _plt():
    return pyplot()


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", metadata={"Software": None})
    _plt().close(fig)
    return buf.getvalue()


def _boxplot(groups: Mapping[str, Sequence[float]], ylabel: str, title: str, name: str) -> Figure:
    plt = _plt()
    labels = list(groups)
    fig, ax = plt.subplots(figsize=(max(4.5, 0.9 * len(labels) + 2), 3.6), dpi=100)
    ax.boxplot([list(groups[k]) for k in labels], showmeans=True)
    ax.set_xticks(range(1, len(labels) + 1))
    ax.set_xticklabels([str(k)[:24] for k in labels], rotation=30 if len(labels) > 4 else 0, ha="right" if len(labels) > 4 else "center")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    return Figure(name, _png(fig), f"{title} (box: quartiles; line: median; triangle: mean)")


def _histograms(groups: Mapping[str, Sequence[float]], xlabel: str, title: str, name: str) -> Figure:
    import numpy as np

    plt = _plt()
    allv = np.concatenate([np.asarray(v, dtype=float) for v in groups.values()])
    lo, hi = float(allv.min()), float(allv.max())
    if 0.0 <= lo and hi <= 1.0:
        lo, hi = 0.0, 1.0
    bins = np.linspace(lo, hi if hi > lo else lo + 1.0, 21)
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=100)
    for i, (k, v) in enumerate(groups.items()):
        ax.hist(v, bins=bins, histtype="step", linewidth=1.6, color=f"C{i}", label=str(k)[:30])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("queries" if len(groups) > 1 or name == "histogram" else "count")
    ax.set_title(title)
    if len(groups) > 1:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return Figure(name, _png(fig), title)


# ---------------------------------------------------------------- the gap (read strictly: schemas.GapReport)

def _gap_section(a: Analysis, sec_id: str) -> Section:
    d = a.data  # validated against schemas.GapReport when read
    title, about = KNOWN_ANALYSES["gap"]
    sec = Section(sec_id, title)
    m = d["measure"]
    meta = d.get("meta") if isinstance(d.get("meta"), Mapping) else {}
    verifier = meta.get("verifier") if isinstance(meta.get("verifier"), Mapping) else {}
    sec.blocks.append(about)
    sec.blocks.append(
        f"{d['n_queries']} queries, {m}, pool depth {d['pool_depth']} per retriever, pool recall "
        f"{d['pool_recall']:.3f}, " + (f"verifier {verifier['name']}, " if verifier.get("name") else "")
        + f"{d['llm_calls']} LLM calls. Source: {a.source}."
    )
    best = d["best_retriever"]
    rows = [[f"retriever {n}" + (" (best)" if n == best["name"] else ""), f"{v:.4f}", ""] for n, v in d["retrievers"].items()]
    rows.append(["verifier, standard pool (lower bound)", f"{d['verifier_standard']['value']:.4f}",
                 f"{d['gap_standard']:+.4f}"])
    rows.append(["verifier, gold-infused pool (upper bound)", f"{d['verifier_gold_infused']['value']:.4f}",
                 f"{d['gap']:+.4f}"])
    sec.blocks.append(Table(["system", m, "minus best retriever"], rows,
                            caption=f"Verification-gap bounds: the gap is {d['gap']:+.4f} ({m})"))
    if d.get("other_qrels"):
        rows = []
        for label, o in d["other_qrels"].items():
            b = o.get("best_retriever", {})
            rows.append([str(label), f"{b.get('name', '?')} {_fmt(b.get('value'))}", _fmt(o.get("verifier_standard")),
                         _fmt(o.get("verifier_gold_infused"))])
        sec.blocks.append(Table(["judgements", "best retriever", "verifier standard", "verifier gold-infused"], rows,
                                caption="The same rankings under other judgements"))
    scaling = d.get("pool_scaling") or []
    if scaling:
        names = list(scaling[0]["retrievers"])
        rows = [[str(r["pool_size"]), f"{r['pool_recall']:.3f}", f"{r['verifier_standard']:.4f}",
                 f"{r['verifier_gold_infused']:.4f}", *(f"{r['retrievers'].get(n, float('nan')):.4f}" for n in names)]
                for r in scaling]
        sec.blocks.append(Table(["pool size", "pool recall", "verifier standard", "verifier gold-infused",
                                 *names], rows, caption="Pool scaling"))
    for p in a.pngs:
        sec.blocks.append(Figure(p.stem, p.read_bytes(), "Pool-scaling curve" if p.name == "pool_scaling.png" else p.name))
    if scaling and not a.pngs:
        sec.blocks.append(f"No pool_scaling.png beside {a.source}.")
    return sec


# ---------------------------------------------------------------- any other analysis (generic)

_MAX_ROWS = 40
_MAX_COLS = 12
_MAX_FIGS = 6


def _is_record(v: Any) -> bool:
    return isinstance(v, Mapping) and bool(v) and sum(_scalar(x) for x in v.values()) >= max(1, len(v) // 2)


def _numeric_list(v: Any, n: int = 1) -> bool:
    return isinstance(v, list) and len(v) >= n and all(_number(x) for x in v)


def _label_of(rec: Mapping, i: int) -> str:
    for k in ("name", "label", "cluster", "id", "signal", "system", "measure", "query_id"):
        if k in rec and _scalar(rec[k]):
            return str(rec[k])
    for v in rec.values():
        if isinstance(v, str):
            return v
    return str(i)


def _generic_section(a: Analysis, sec_id: str) -> Section:
    title, about = KNOWN_ANALYSES.get(a.kind, (a.kind.replace("_", " ").capitalize(), ""))
    sec = Section(sec_id, title)
    if about:
        sec.blocks.append(about)
    version = a.data.get("version")
    sec.blocks.append(f"Source: {a.source} (kind {a.kind!r}, version {version if version is not None else '?'}).")
    scalars: list[list[str]] = []
    tables: list[Table] = []
    figures: list[Figure] = []

    def walk(value: Any, path: str, depth: int) -> None:
        if isinstance(value, Mapping):
            if _before_after(value, path, tables):
                value = {k: v for k, v in value.items() if k not in ("before", "after")}
            values = list(value.values())
            if path and len(value) >= 2 and all(_is_record(x) for x in values):
                tables.append(_records_table(path, [{"": k, **x} for k, x in value.items()]))
                _record_lists(path, [(k, x) for k, x in value.items()], figures)
                return
            if path and len(value) >= 20 and all(_number(x) for x in values):  # e.g. a value per query
                walk(values, path, depth)
                return
            if path and len(value) >= 2 and all(isinstance(x, Mapping) for x in values) and _pivot(value, path, tables):
                return
            if path and len(value) >= 2 and all(_numeric_list(x, 1) for x in values):
                if len(figures) < _MAX_FIGS:
                    figures.append(_boxplot({k: x for k, x in value.items()}, path, f"{path} by {_last(path)}", path))
                return
            for k, v in value.items():
                if not path and k in _META_KEYS:
                    continue
                walk(v, f"{path}.{k}" if path else str(k), depth + 1)
        elif isinstance(value, list):
            if _numeric_list(value, 3):
                if len(figures) < _MAX_FIGS:
                    figures.append(_histograms({path: value}, path, f"Histogram of {path} ({len(value)} values)", path))
                scalars.append([path, f"{len(value)} values, mean {sum(value) / len(value):.4f}"])
            elif value and all(_is_record(x) for x in value):
                tables.append(_records_table(path, value))
                _record_lists(path, [(_label_of(x, i), x) for i, x in enumerate(value)], figures)
            elif all(_scalar(x) for x in value):
                scalars.append([path, _fmt(value) if len(value) <= 12 else f"[{len(value)} values]"])
            else:
                scalars.append([path, f"[{len(value)} items]"])
        elif depth <= 6:
            scalars.append([path, _fmt(value)])

    walk(a.data, "", 0)
    if scalars:
        shown = scalars[:60]
        sec.blocks.append(Table(["field", "value"], shown, caption="Fields" + (f" (first 60 of {len(scalars)})" if len(scalars) > 60 else "")))
    sec.blocks.extend(tables)
    sec.blocks.extend(figures)
    for p in a.pngs:
        sec.blocks.append(Figure(p.stem, p.read_bytes(), f"{p.name} (drawn by the analysis)"))
    if not (scalars or tables or figures or a.pngs):
        sec.blocks.append("The file holds no content besides kind, task and version.")
    return sec


def _last(path: str) -> str:
    return path.rsplit(".", 1)[-1]


def _before_after(value: Mapping, path: str, tables: list[Table]) -> bool:
    before, after = value.get("before"), value.get("after")
    if not (isinstance(before, Mapping) and isinstance(after, Mapping)):
        return False
    keys = [k for k in before if k in after and _number(before[k]) and _number(after[k])]
    if not keys:
        return False
    rows = [[str(k), _fmt(before[k]), _fmt(after[k]), f"{after[k] - before[k]:+.4f}"] for k in keys]
    tables.append(Table(["", "before", "after", "delta"], rows,
                        caption=f"{path}: before and after" if path else "Before and after"))
    return True


def _pivot(value: Mapping, path: str, tables: list[Table]) -> bool:
    """name -> {part -> {key: scalar}} (variants -> means -> measure): one table per part, a row per name."""
    parts: list[str] = []
    for x in value.values():
        for k, v in x.items():
            if k not in parts and isinstance(v, Mapping) and v and all(_scalar(y) or _numeric_list(y) for y in v.values()):
                parts.append(k)
    if not parts:
        return False
    direct = [{"": n, **{k: v for k, v in x.items() if _scalar(v)}} for n, x in value.items()]
    if any(len(r) > 1 for r in direct):
        tables.append(_records_table(path, direct))
    for part in parts:
        rows = [{"": n, **x[part]} for n, x in value.items() if isinstance(x.get(part), Mapping)]
        tables.append(_records_table(f"{path}: {part}", rows))
    return True


def _records_table(path: str, records: Sequence[Mapping]) -> Table:
    cols: list[str] = []
    for r in records:
        for k, v in r.items():
            if k not in cols and (_scalar(v) or _numeric_list(v)):
                cols.append(k)
    cols = cols[:_MAX_COLS]
    rows = [[_fmt(r.get(c)) for c in cols] for r in records[:_MAX_ROWS]]
    more = f" (first {_MAX_ROWS} of {len(records)})" if len(records) > _MAX_ROWS else ""
    return Table([c if c else _last(path.split(":")[0]) for c in cols], rows, caption=f"{path}{more}")


def _record_lists(path: str, items: Sequence[tuple[str, Mapping]], figures: list[Figure]) -> None:
    """Records that each carry a list of numbers under the same key: one box per record (per-cluster values)."""
    keys = set.intersection(*(set(k for k, v in r.items() if _numeric_list(v, 1)) for _, r in items)) if items else set()
    for key in sorted(keys):
        if len(figures) >= _MAX_FIGS:
            return
        figures.append(_boxplot({str(label): r[key] for label, r in items[:30]}, key, f"{path}: {key} per entry",
                                f"{path}-{key}"))


# ---------------------------------------------------------------- status


def _status_section(found, not_run, ignored, dirs) -> Section:
    sec = Section("analyses", "Analyses run and not run")
    rows = [[a.kind, KNOWN_ANALYSES.get(a.kind, (a.kind.replace("_", " ").capitalize(),))[0], "run", str(a.source)]
            for a in found]
    rows += [[k, KNOWN_ANALYSES[k][0], "not run", ""] for k in not_run]
    sec.blocks.append(Table(["kind", "analysis", "status", "source"], rows,
                            caption=f"Analyses found in {len(dirs)} director{'y' if len(dirs) == 1 else 'ies'} given with --analyses"))
    if not_run:
        sec.blocks.append("Not run for this task: " + ", ".join(not_run) + ". Run them with their gapbench command and "
                          "pass their output directories with --analyses.")
    if ignored:
        sec.blocks.append(Table(["file", "why ignored"], [[i["source"], i["reason"]] for i in ignored],
                                caption="Ignored files"))
    return sec


# ---------------------------------------------------------------- renderers

_CSS = """
body{font-family:-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
main{max-width:1050px;margin:0 auto;padding:24px 28px 60px;background:#fff}
h1{font-size:1.6em;margin:.2em 0 .3em}h2{font-size:1.25em;margin-top:2em;border-bottom:2px solid #e3e6ea;padding-bottom:.2em}
p{line-height:1.45}.meta{color:#5b6475;font-size:.9em}
nav ul{columns:2;padding-left:1.2em;margin:.4em 0}
table{border-collapse:collapse;margin:.8em 0 1.2em;font-size:.88em}
caption{caption-side:top;text-align:left;font-weight:600;padding:4px 0;color:#394150}
th,td{border:1px solid #d8dce2;padding:4px 9px;text-align:left;vertical-align:top}
th{background:#eef1f5}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr:nth-child(even) td{background:#fafbfc}sup{color:#0a6d2f;font-weight:700}
figure{margin:1em 0 1.6em}figure img{max-width:100%;border:1px solid #e3e6ea}
figcaption{font-size:.85em;color:#5b6475}
"""

def _html(report: Report) -> str:
    e = html.escape
    d = report.data
    out = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>gapbench report: {e(report.task)}</title><style>{_CSS}</style></head><body><main>",
        f"<h1>Gap report: {e(report.task)}</h1>",
        f'<p class="meta">{len(d["systems"])} systems: {e(", ".join(s["system"] for s in d["systems"]))}. '
        f"Main measure {e(d['main_measure'])}. gapbench {e(d['gapbench_version'])}.</p>",
        "<nav><ul>" + "".join(f'<li><a href="#{e(s.id)}">{e(s.title)}</a></li>' for s in report.sections) + "</ul></nav>",
    ]
    for s in report.sections:
        out.append(f'<section id="{e(s.id)}"><h2>{e(s.title)}</h2>')
        for b in s.blocks:
            if isinstance(b, str):
                out.append(f"<p>{e(b)}</p>")
            elif isinstance(b, Table):
                out.append(b.html())
            else:
                data = base64.b64encode(b.png).decode("ascii")
                out.append(f'<figure><img alt="{e(b.caption)}" src="data:image/png;base64,{data}">'
                           f"<figcaption>{e(b.caption)}</figcaption></figure>")
        out.append("</section>")
    out.append("</main></body></html>")
    return "\n".join(out) + "\n"


def _markdown(report: Report) -> str:
    d = report.data
    out = [f"# Gap report: {report.task}", "",
           f"{len(d['systems'])} systems: {', '.join(s['system'] for s in d['systems'])}. Main measure "
           f"{d['main_measure']}. gapbench {d['gapbench_version']}.", ""]
    for s in report.sections:
        out += [f"## {s.title}", ""]
        for b in s.blocks:
            if isinstance(b, str):
                out += [b, ""]
            elif isinstance(b, Table):
                out += [b.markdown(), ""]
            else:
                out += [f"![{md_cell(b.caption)}]({b.name})", ""]
    return "\n".join(out)
