"""Which runs a stored gate may read: the retrievers its signals were calibrated on, and no other.

A gate's threshold is a number in the units of the retrievers it was calibrated on (bm25's top-1 score, the
divergence of bm25 and MiniLM). Applied to another retriever's run (bm25-lucene, another dense model, other bm25
parameters) it still escalates some queries, and those are meaningless. signals.json records, per retriever, its
spec, kind, name (as a run directory's manifest names it), adapter fingerprint and config; a run matches the retriever
whose fingerprint it has. A run whose name is a calibrated one but whose fingerprint differs was made with another
config, and one whose name is none of them is another retriever: both are refused, naming the run's retriever and the
calibrated ones. Files written before fingerprints were recorded match by name (the spec as given, or the name).

    runs = match_gate_runs(stored, {"runs/bm25": (manifest["retriever"], run)}, source="sig/signals.json")
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError
from ..types import Run

# A config longer than this in JSON (an LLM retriever's, with its rewrites and traces) is left out of signals.json;
# the fingerprint still identifies the retriever.
MAX_CONFIG_CHARS = 4000
_READS_PRIMARY = ("max_score", "evidence_coverage")
DENSE_NAMES = frozenset({"dense", "openai-embed", "colbert"})
SPARSE_NAMES = frozenset({"bm25", "bm25-lucene", "bm25-qs", "bm25-okapi"})


def retriever_kind(spec: str) -> str:
    """``dense``, ``sparse`` or ``other`` from a retriever spec's name (the kinds the signals read)."""
    head = spec.split(":", 1)[0].strip()
    if head in DENSE_NAMES:
        return "dense"
    if head in SPARSE_NAMES:
        return "sparse"
    return "other"


def retriever_identity(retriever: Any) -> dict[str, Any]:
    """``name``, ``fingerprint`` and ``config`` of a built retriever, as a run directory's manifest records them."""
    from ..retrieval import config_of, fingerprint_of

    out: dict[str, Any] = {"name": getattr(retriever, "name", None) or type(retriever).__name__,
                           "fingerprint": fingerprint_of(retriever)}
    config = config_of(retriever)
    if len(json.dumps(config, default=str)) <= MAX_CONFIG_CHARS:
        out["config"] = json.loads(json.dumps(config, default=str))
    return out


def calibrated(signals: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The retrievers a signals.json was calibrated on (spec, kind and, when recorded, name, fingerprint, config)."""
    return [{**r, "kind": r.get("kind") or retriever_kind(r["spec"])} for r in signals.get("retrievers") or ()]


def signal_readers(signals: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    """The calibrated specs whose runs the signals ``names`` read, in calibration order: the primary for max_score and
    evidence_coverage, the first dense for dense_variance, the first dense and first sparse for retriever_divergence,
    every dense for dense_agreement."""
    cal = calibrated(signals)
    specs = [r["spec"] for r in cal]
    primary = signals.get("primary") or (specs[0] if specs else None)
    dense = [r["spec"] for r in cal if r["kind"] == "dense"]
    sparse = [r["spec"] for r in cal if r["kind"] == "sparse"]
    reads: list[str] = []
    for name in names:
        if name in _READS_PRIMARY:
            reads += [primary] if primary else []
        elif name == "dense_variance":
            reads += dense[:1]
        elif name == "retriever_divergence":
            reads += dense[:1] + sparse[:1]
        elif name == "dense_agreement":
            reads += dense
    return [s for s in specs if s in reads]


def match_gate_runs(signals: Mapping[str, Any], runs: Mapping[str, tuple[Mapping[str, Any] | None, Run]],
                    names: Sequence[str], *, source: object = "signals.json") -> dict[str, Run]:
    """The runs a gate reads, keyed by the calibrated spec each is a run of, in calibration order.

    ``runs``: label (a run directory) -> (the ``retriever`` entry of its manifest: ``name``, ``fingerprint``,
    ``config``; None when unknown, then the label is the name; the Run). ``names``: the gate's signals. A
    ConfigError names the run and both retrievers when a run is of a retriever or config the gate was not calibrated
    on, when two runs are of one retriever, and when a retriever the gate's signals read has no run.
    """
    cal = calibrated(signals)
    if not cal:  # a gate made by analyse() without the retrievers recorded: the runs' names are their specs
        return {(entry or {}).get("name") or label: run for label, (entry, run) in runs.items()}
    matched: dict[str, tuple[str, Run]] = {}
    for label, (entry, run) in runs.items():
        spec = _match(cal, label, entry or {"name": label}, source)
        if spec in matched:
            raise ConfigError(f"{label} and {matched[spec][0]} are both runs of {spec!r}; give each retriever's run "
                              "once.")
        matched[spec] = (label, run)
    for spec in signal_readers(signals, names):
        if spec not in matched:
            reader = next(n for n in names if spec in signal_readers(signals, [n]))
            raise ConfigError(f"the gate in {source} reads {reader} from the run of {spec!r}, and none of the runs "
                              f"given ({', '.join(runs)}) is of it; give {spec!r}'s run too (its run directory, made "
                              f"with the config the gate was calibrated on).")
    return {r["spec"]: matched[r["spec"]][1] for r in cal if r["spec"] in matched}


def _match(cal: list[dict[str, Any]], label: str, entry: Mapping[str, Any], source: object) -> str:
    """The calibrated spec the run ``label`` is a run of, or a ConfigError naming both."""
    name, fp = entry.get("name"), entry.get("fingerprint")
    if fp:
        for r in cal:
            if r.get("fingerprint") == fp:
                return r["spec"]
    same_name = [r for r in cal if name in (r.get("name"), r["spec"])]
    if same_name and not (fp and same_name[0].get("fingerprint")):  # a file or manifest without fingerprints
        return same_name[0]["spec"]
    # the same adapter (bm25, bm25:k1=1.2) with a fingerprint on both sides that differs: another config
    differ = [r for r in cal if fp and r.get("fingerprint") and _head(name) in (_head(r.get("name")), _head(r["spec"]))]
    if differ and fp:  # fp is set whenever differ is not empty
        r = differ[0]
        raise ConfigError(f"{label} is a run of {name!r} with another config than the {r['spec']!r} the gate in "
                          f"{source} was calibrated on ({_difference(entry.get('config'), r.get('config'))}; "
                          f"fingerprint {fp[:12]} here, {r['fingerprint'][:12]} there); the gate's thresholds are in "
                          f"that config's units. Give a run made with it, or calibrate a gate on this one "
                          f"(`gapbench signals` with {name!r} among its retrievers).")
    raise ConfigError(f"{label} is a run of {name!r}, but the gate in {source} was calibrated on "
                      f"{_listed(cal)}; its thresholds are in their units, so another retriever's run would be "
                      f"gated on numbers that mean nothing for it. Give runs of {_listed(cal)}, or calibrate a gate on "
                      f"{name!r} (`gapbench signals` with it among its retrievers).")


def _head(name: Any) -> str:
    """The adapter's name in a retriever name or spec (``bm25`` of ``bm25:k1=1.2``)."""
    return str(name or "").split(":", 1)[0].strip()


def _listed(cal: list[dict[str, Any]]) -> str:
    return ", ".join(repr(r["spec"]) for r in cal)


def _difference(here: Any, there: Any) -> str:
    """The config keys whose values differ (at most three), or a note when a config is not recorded."""
    if not isinstance(here, Mapping) or not isinstance(there, Mapping):
        return "config not recorded on both sides"
    keys = [k for k in [*there, *(k for k in here if k not in there)] if here.get(k) != there.get(k)]
    if not keys:
        return "same recorded config, another model revision or adapter version"

    def short(value: Any) -> str:
        text = repr(value)
        return text if len(text) <= 40 else text[:37] + "..."

    shown = [f"{k} {short(here.get(k))} here, {short(there.get(k))} there" for k in keys[:3]]
    return "; ".join(shown) + (f"; and {len(keys) - 3} more" if len(keys) > 3 else "")
