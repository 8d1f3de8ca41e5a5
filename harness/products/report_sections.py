"""The sections of a report's analyses: the gap's own (bounds, pool scaling), any other kind rendered from its
structure (:func:`generic_section`), and the list of analyses run and not run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..tables import Table
from .report_analyses import KNOWN_ANALYSES, Analysis
from .report_blocks import Figure, Section, boxplot, fmt, histograms, is_number, is_scalar

_META_KEYS = ("kind", "task", "version")


def analysis_sections(found: Sequence[Analysis]) -> list[Section]:
    """One section per analysis found, in order (ids numbered when a kind repeats: ``signals-2``)."""
    sections = []
    counts: dict[str, int] = {}
    for a in found:
        counts[a.kind] = counts.get(a.kind, 0) + 1
        sec_id = f"{a.kind}-{counts[a.kind]}" if counts[a.kind] > 1 else a.kind
        sections.append(gap_section(a, sec_id) if a.kind == "gap" else generic_section(a, sec_id))
    return sections


# ---------------------------------------------------------------- the gap (read strictly: schemas.GapReport)

def gap_section(a: Analysis, sec_id: str) -> Section:
    d = a.data  # validated against schemas.GapReport when read
    title, about = KNOWN_ANALYSES["gap"]
    sec = Section(sec_id, title)
    m = d["measure"]
    meta = d.get("meta")
    meta = meta if isinstance(meta, Mapping) else {}
    verifier = meta.get("verifier")
    verifier = verifier if isinstance(verifier, Mapping) else {}
    sec.blocks.append(about)
    sec.blocks.append(
        f"{d['n_queries']} queries, {m}, pool depth {d['pool_depth']} per retriever, pool recall "
        f"{d['pool_recall']:.3f}, " + (f"verifier {verifier['name']}, " if verifier.get("name") else "")
        + f"{d['llm_calls']} LLM calls. Source: {a.source}."
    )
    best = d["best_retriever"]
    rows = [[f"retriever {n}" + (" (best)" if n == best["name"] else ""), f"{v:.4f}", ""]
            for n, v in d["retrievers"].items()]
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
            rows.append([str(label), f"{b.get('name', '?')} {fmt(b.get('value'))}", fmt(o.get("verifier_standard")),
                         fmt(o.get("verifier_gold_infused"))])
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
        caption = "Pool-scaling curve" if p.name == "pool_scaling.png" else p.name
        sec.blocks.append(Figure(p.stem, p.read_bytes(), caption))
    if scaling and not a.pngs:
        sec.blocks.append(f"No pool_scaling.png beside {a.source}.")
    return sec


# ---------------------------------------------------------------- any other analysis (generic)

_MAX_ROWS = 40
_MAX_COLS = 12
_MAX_FIGS = 6


def _is_record(v: Any) -> bool:
    return isinstance(v, Mapping) and bool(v) and sum(is_scalar(x) for x in v.values()) >= max(1, len(v) // 2)


def _numeric_list(v: Any, n: int = 1) -> bool:
    return isinstance(v, list) and len(v) >= n and all(is_number(x) for x in v)


def _label_of(rec: Mapping, i: int) -> str:
    for k in ("name", "label", "cluster", "id", "signal", "system", "measure", "query_id"):
        if k in rec and is_scalar(rec[k]):
            return str(rec[k])
    for v in rec.values():
        if isinstance(v, str):
            return v
    return str(i)


def generic_section(a: Analysis, sec_id: str) -> Section:
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
            if path and len(value) >= 20 and all(is_number(x) for x in values):  # e.g. a value per query
                walk(values, path, depth)
                return
            if path and len(value) >= 2 and all(isinstance(x, Mapping) for x in values) and _pivot(value, path, tables):
                return
            if path and len(value) >= 2 and all(_numeric_list(x, 1) for x in values):
                if len(figures) < _MAX_FIGS:
                    figures.append(boxplot({k: x for k, x in value.items()}, path, f"{path} by {_last(path)}", path))
                return
            for k, v in value.items():
                if not path and k in _META_KEYS:
                    continue
                walk(v, f"{path}.{k}" if path else str(k), depth + 1)
        elif isinstance(value, list):
            if _numeric_list(value, 3):
                if len(figures) < _MAX_FIGS:
                    figures.append(histograms({path: value}, path, f"Histogram of {path} ({len(value)} values)", path))
                scalars.append([path, f"{len(value)} values, mean {sum(value) / len(value):.4f}"])
            elif value and all(_is_record(x) for x in value):
                tables.append(_records_table(path, value))
                _record_lists(path, [(_label_of(x, i), x) for i, x in enumerate(value)], figures)
            elif all(is_scalar(x) for x in value):
                scalars.append([path, fmt(value) if len(value) <= 12 else f"[{len(value)} values]"])
            else:
                scalars.append([path, f"[{len(value)} items]"])
        elif depth <= 6:
            scalars.append([path, fmt(value)])

    walk(a.data, "", 0)
    if scalars:
        shown = scalars[:60]
        more = f" (first 60 of {len(scalars)})" if len(scalars) > 60 else ""
        sec.blocks.append(Table(["field", "value"], shown, caption="Fields" + more))
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
    keys = [k for k in before if k in after and is_number(before[k]) and is_number(after[k])]
    if not keys:
        return False
    rows = [[str(k), fmt(before[k]), fmt(after[k]), f"{after[k] - before[k]:+.4f}"] for k in keys]
    tables.append(Table(["", "before", "after", "delta"], rows,
                        caption=f"{path}: before and after" if path else "Before and after"))
    return True


def _pivot(value: Mapping, path: str, tables: list[Table]) -> bool:
    """name -> {part -> {key: scalar}} (variants -> means -> measure): one table per part, a row per name."""
    parts: list[str] = []
    for x in value.values():
        for k, v in x.items():
            flat = isinstance(v, Mapping) and v and all(is_scalar(y) or _numeric_list(y) for y in v.values())
            if k not in parts and flat:
                parts.append(k)
    if not parts:
        return False
    direct = [{"": n, **{k: v for k, v in x.items() if is_scalar(v)}} for n, x in value.items()]
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
            if k not in cols and (is_scalar(v) or _numeric_list(v)):
                cols.append(k)
    cols = cols[:_MAX_COLS]
    rows = [[fmt(r.get(c)) for c in cols] for r in records[:_MAX_ROWS]]
    more = f" (first {_MAX_ROWS} of {len(records)})" if len(records) > _MAX_ROWS else ""
    return Table([c if c else _last(path.split(":")[0]) for c in cols], rows, caption=f"{path}{more}")


def _record_lists(path: str, items: Sequence[tuple[str, Mapping]], figures: list[Figure]) -> None:
    """Records that each carry a list of numbers under the same key: one box per record (per-cluster values)."""
    keys = set.intersection(*({k for k, v in r.items() if _numeric_list(v, 1)} for _, r in items)) if items else set()
    for key in sorted(keys):
        if len(figures) >= _MAX_FIGS:
            return
        figures.append(boxplot({str(label): r[key] for label, r in items[:30]}, key, f"{path}: {key} per entry",
                                f"{path}-{key}"))


# ---------------------------------------------------------------- status


def status_section(found: Sequence[Analysis], not_run: Sequence[str], ignored: Sequence[Any],
                   dirs: Sequence[Any]) -> Section:
    """The analyses run (with their files), the known ones not run, and the files left out and why."""
    sec = Section("analyses", "Analyses run and not run")
    rows = [[a.kind, KNOWN_ANALYSES.get(a.kind, (a.kind.replace("_", " ").capitalize(),))[0], "run", str(a.source)]
            for a in found]
    rows += [[k, KNOWN_ANALYSES[k][0], "not run", ""] for k in not_run]
    sec.blocks.append(Table(["kind", "analysis", "status", "source"], rows,
                            caption=f"Analyses found in the {len(dirs)} director{'y' if len(dirs) == 1 else 'ies'} "
                                    "given"))
    if not_run:
        sec.blocks.append("Not run for this task: " + ", ".join(not_run) + ". Run them with their gapbench command and "
                          "pass their output directories to the report (`gapbench report TASK RUN_DIR... --analyses "
                          "DIR`).")
    if ignored:
        sec.blocks.append(Table(["file", "why ignored"], [[i.source, i.reason] for i in ignored],
                                caption="Ignored files"))
    return sec
