"""Which scorer diagnoses a retriever's entities (``diagnosis``): a probe given, bound to the retriever's fingerprint
(:func:`bind_probe`, done by ``gapbench argus probe``) or shipped for the offline MiniLM (:func:`shipped_probe`), else
the exact audit (:class:`~.diagnosis.MentionAudit`); the label heuristic (:class:`~.diagnosis.LabelPrior`) only when
asked for. :func:`diagnosis_for` decides, :func:`mention_scorer` builds the scorer that stands in for a probe.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

from ....cache import cache_dir
from ....errors import ConfigError, GapbenchError
from ....types import Corpus
from .diagnosis import LabelPrior, MentionAudit, embedding_mode, retriever_fingerprints
from .kb import DEFAULT_K_AUG, ReferenceKB

# diagnosis: auto = the probe bound to the retriever's fingerprint if one is, else the exact audit
DIAGNOSES = ("auto", "probe", "audit", "label-prior")
# the probe shipped for the offline MiniLM (dense): folder under gapbench/tasks/data; a diagnosis names it
# "shipped:<path>"
SHIPPED_PROBE = ("argus", "probe_minilm")
SHIPPED_SOURCE = "shipped:"


def load_probe(probe: Any, retriever: Any) -> Any:
    """A probe object, or one loaded from a path with ``gapbench.analyses.argus.probe.Probe.load(path, retriever)``."""
    if probe is None or callable(getattr(probe, "predict", None)):
        return probe
    path = Path(probe)
    if not path.exists():
        raise ConfigError(f"probe file {str(path)!r} does not exist; give a probe saved by `gapbench argus probe` "
                          "(or train one with gapbench.analyses.argus.probe.train_probe).")
    try:
        from ..probe.training import Probe
    except ImportError as exc:
        raise GapbenchError(f"loading a probe needs gapbench.analyses.argus.probe.training, which cannot be imported "
                            f"({exc}).") from None
    # mention embeddings are span-pooled, so the probe must come from the span encoder of this retriever

    fp = getattr(retriever, "fingerprint", "")
    span_fp = next((f for f in retriever_fingerprints(retriever) if f != fp), None)
    if embedding_mode(retriever) == "span" and span_fp:
        try:
            return Probe.load(path, span_fp)
        except GapbenchError:
            pass  # fall through: a probe keyed by the retriever's own fingerprint, or the loader's own message
    return Probe.load(path, retriever)


def probe_store() -> Path:
    """Where probes are bound to retrievers: one folder per embedding fingerprint (``gapbench argus probe`` binds the
    probe it saves)."""
    return cache_dir("argus") / "probes"


def bind_probe(probe: Any) -> Path:
    """Save ``probe`` (a :class:`gapbench.analyses.argus.probe.Probe`) under its fingerprint in :func:`probe_store`, so
    that the default diagnosis of its retriever finds it; returns the folder."""
    return probe.save(probe_store() / probe.fingerprint[:32])


def shipped_probe_dir() -> Path:
    """The probe shipped for the offline MiniLM (``dense``), trained by ``gapbench argus probe`` on the shipped slice
    (its PROVENANCE.md says how)."""
    res = resources.files("gapbench.tasks") / "data"
    for part in SHIPPED_PROBE:  # one part at a time: Python 3.10's Traversable.joinpath takes one
        res = res / part
    return Path(str(res))


def shipped_probe(retriever: Any) -> tuple[Any, Path] | None:
    """The shipped probe and its folder when ``retriever``'s fingerprint (or its span encoder's) is the one the probe
    was trained for, else None: the sidecar is read first, so another retriever never loads its weights."""
    folder = shipped_probe_dir()
    side = folder / "probe.json"
    if not side.is_file():
        return None
    meta = json.loads(side.read_text(encoding="utf-8"))
    trained_for = {meta.get("fingerprint"), meta.get("meta", {}).get("retriever_fingerprint")}
    if not trained_for & retriever_fingerprints(retriever):
        return None
    return load_probe(folder, retriever), folder


def bound_probe(retriever: Any) -> tuple[Any, Path] | None:
    """The probe bound to ``retriever``'s fingerprint (or its span encoder's) and its folder, else the shipped probe
    when it was trained for this retriever (:func:`shipped_probe`), else None. A probe the user bound wins."""
    for fp in sorted(retriever_fingerprints(retriever)):
        folder = probe_store() / fp[:32]
        if (folder / "probe.json").is_file():
            return load_probe(folder, retriever), folder
    return shipped_probe(retriever)


def probe_source(folder: Path) -> str:
    """How a diagnosis names the probe it used: its folder, prefixed ``shipped:`` for the shipped probe."""
    return f"{SHIPPED_SOURCE}{folder}" if Path(folder) == shipped_probe_dir() else str(folder)


def diagnosis_for(mode: str, retriever: Any, probe: Any = None) -> tuple[str, Any, str | None]:
    """``(method, probe object or None, where the probe came from)`` for a ``diagnosis`` mode.

    ``auto``: an explicit probe, else the probe bound to the retriever, else the shipped probe if it was trained for
    this retriever (``dense``; the source then reads ``shipped:<folder>``), else the exact ``audit``; ``probe``: the
    same, but an error when there is none; ``audit`` and ``label-prior`` take no probe.
    """
    if mode not in DIAGNOSES:
        from ....errors import UnknownNameError

        raise UnknownNameError("diagnosis", mode, DIAGNOSES)
    if mode in ("audit", "label-prior"):
        if probe is not None:
            raise ConfigError(f"diagnosis {mode!r} uses no probe, but a probe was given; leave the probe out or "
                              "use diagnosis 'probe'.")
        return mode, None, None
    if probe is not None:
        return "probe", load_probe(probe, retriever), str(probe) if isinstance(probe, (str, os.PathLike)) else "given"
    found = bound_probe(retriever)
    if found is not None:
        return "probe", found[0], probe_source(found[1])
    if mode == "probe":
        raise ConfigError("diagnosis 'probe': no probe is bound to this retriever's fingerprint (none under "
                          f"{probe_store()}); train one with `gapbench argus probe -r SPEC --out DIR` (it binds it), "
                          "give one (probe=DIR), or use diagnosis 'audit'.")
    return "audit", None, None


def mention_scorer(method: str, retriever: Any, corpus: Corpus, kb: ReferenceKB, k_aug: int = DEFAULT_K_AUG) -> Any:
    """The ``fallback`` scorer :func:`diagnose` needs for a method of :func:`diagnosis_for` (None for a probe)."""
    if method == "audit":
        return MentionAudit(retriever, corpus, kb, k_aug)
    return LabelPrior() if method == "label-prior" else None
