"""A stored gate applied to runs: :func:`load_signals` reads signals.json back (checked by its schema),
:func:`gate_runs` computes the gate's signals from runs and escalates, :func:`write_escalations` writes escalate.tsv
(``query_id``, ``value``, ``escalate`` 0/1). The ``gapbench gate`` command is these three."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ...errors import ConfigError, DataFormatError
from ...files import atomic_writer
from ...formats import StrictJSONError, parse_json_strict
from ...schemas import validate_analysis
from ...types import Corpus, Queries, Run
from ..gate_retrievers import calibrated
from .definitions import TermExtractor, compute_signals
from .gate import apply_either, apply_gate


def load_signals(path: str | Path, gate: str = "gate") -> dict[str, Any]:
    """A signals.json (or the directory holding it), checked for the fields the gate needs (``gate``: ``"gate"``, or
    ``"gate_either"`` for the gate on either firing)."""
    path = Path(path)
    if path.is_dir():
        path = path / "signals.json"
    if not path.exists():
        raise DataFormatError("missing; make it with `gapbench signals TASK --retrievers ... -o DIR`.", path=path)
    try:  # the strict reader of every file gapbench wrote and reads back: no NaN, no key twice
        d = parse_json_strict(path.read_bytes(), max_depth=64)
    except OSError as exc:
        raise DataFormatError(f"cannot be read ({exc.strerror or exc}).", path=path) from None
    except StrictJSONError as exc:
        raise DataFormatError(f"{str(exc).rstrip('.')}; recompute it with `gapbench signals`.", path=path,
                              line=exc.line) from None
    if not isinstance(d, dict) or d.get("kind") != "signals" or d.get("version") != 1:
        found = (d.get("kind"), d.get("version")) if isinstance(d, dict) else (type(d).__name__, None)
        raise DataFormatError(f"kind {found[0]!r} version {found[1]!r}; expected a signals.json "
                              "(kind 'signals', version 1).", path=path)
    validate_analysis("signals", d, path)
    if gate == "gate_either" and not d.get("gate_either"):
        why = d.get("gate_either_note", "written before the either gate existed")
        raise DataFormatError(f"holds no gate on either firing ({why}); recompute it with `gapbench signals`.",
                              path=path)
    if not d.get("gate"):
        raise DataFormatError(f"holds no gate ({d.get('gate_note', 'not calibrated')}); recompute it on labelled "
                              "queries with both weak and good retrievals.", path=path)
    return d


def gate_runs(
    runs: Mapping[str, Run], signals: Mapping[str, Any], *, corpus: Corpus | None = None,
    queries: Queries | None = None, term_extractor: TermExtractor | None = None, either: bool = False,
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Apply a stored gate to runs (spec -> Run): ``(query_ids, values, escalate flags)``; with ``either``, the gate on
    either firing, whose values have one column per signal (shape ``(n, 2)``).

    The runs must hold the ingredients of the gate's signals (e.g. a dense and a sparse run for retriever_divergence);
    the primary is the stored primary when present among the runs, else the first run. Runs keyed by the calibrated
    specs, as :func:`gapbench.analyses.gate_retrievers.match_gate_runs` gives them, are the runs of the retrievers
    the gate was calibrated on; that function refuses any other.
    """
    names = gate_signals(signals, either)
    specs = list(runs)
    primary = signals.get("primary") if signals.get("primary") in runs else specs[0]
    kinds = {r["spec"]: r["kind"] for r in calibrated(signals)}  # the calibration's kinds, whatever the runs' names
    qids = list(dict.fromkeys(q for r in runs.values() for q in r))
    table = compute_signals(runs, qids, window=int(signals.get("window") or 10), primary=primary, corpus=corpus,
                            queries=queries, term_extractor=term_extractor, signals=names, kinds=kinds)
    got: list[np.ndarray] = []
    for name in names:
        v = table.values[name]
        if v is None:
            raise ConfigError(f"the gate's signal {name} cannot be computed from these runs ({', '.join(specs)}): "
                              f"{table.reasons[name]}. Give the run directories it needs.")
        got.append(v)
    if not either:
        return qids, got[0], apply_gate(got[0], signals["gate"])
    values = np.stack(got, axis=1)
    return qids, values, apply_either(values[:, 0], values[:, 1], signals["gate_either"])


def gate_signals(signals: Mapping[str, Any], either: bool = False) -> list[str]:
    """The signal names a stored gate reads: the gate's one, or the either gate's two."""
    return list(signals["gate_either"]["signals"]) if either else [signals["gate"]["signal"]]


def write_escalations(path: str | Path, query_ids: Sequence[str], values: npt.ArrayLike, flags: npt.ArrayLike,
                      names: Sequence[str] | None = None) -> Path:
    """escalate.tsv: ``query_id<TAB>value<TAB>escalate`` (0/1) with a header line; with ``names`` (the either gate),
    one value column per name, headed by it, from 2-D ``values``."""
    path = Path(path)
    rows = np.asarray(values, dtype=np.float64).reshape(len(query_ids), -1)
    with atomic_writer(path) as fh:
        fh.write("\t".join(["query_id", *(names or ["value"]), "escalate"]) + "\n")
        for q, v, f in zip(query_ids, rows, np.asarray(flags).reshape(-1)):
            fh.write("\t".join([q, *(repr(float(x)) for x in v), str(int(f))]) + "\n")
    return path
