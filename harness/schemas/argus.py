"""The ARGUS analyses' files: audit, probe, sweep, dataset and compare."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, PrivateAttr

from ..errors import ConfigError
from .base import Model, Number, One

# ---------------------------------------------------------------- the audit (argus_audit.json)
BandName = Literal["low", "mid", "high"]
# a probe family's hyper-parameters, as the grids give them (``hidden`` is a list of layer widths)
Params = dict[str, bool | int | float | str | list[int]]
GridSet = Literal["reduced", "paper"]  # the probe's hyper-parameter grids: a cheap sweep, or appendix C.1's


class AuditEncoder(Model):
    """The entity encoder of an audit or sweep: name, pooling (span, sentence or none), fingerprint and dimension."""

    name: str
    pooling: str
    fingerprint: str
    dim: int
    retriever_fingerprint: str | None = None  # the retriever's own; absent in sweeps and files written before it


class PoolSizes(Model):
    """Candidates per query actually ranked (the target and its neutrals), over every (target, query) pair."""

    min: int
    median: Number
    mean: Number
    max: int


class BandCounts(Model):
    low: int
    mid: int
    high: int


class Terciles(Model):
    cutoffs: list[Number]  # the RPS quantiles at 1/3 and 2/3
    counts: BandCounts


class Grounding(Model):
    """How each entity's label was found in its paragraph (span pooling), prepended to it, or absent."""

    label_found: int
    label_prepended: int
    no_label: int


class AuditEntity(Model):
    qid: str
    label: str | None
    rps: Number
    hits: int
    n_queries: int
    tercile: BandName
    ranks: list[int]
    n_candidates: list[int]


class ArgusAudit(Model):
    """``argus_audit.json``: rank-probability scores (RPS) of entities, ARGUS' blind-spot audit (the report
    :func:`gapbench.argus_audit` returns, holding in memory what the file leaves out: the data audited and every
    entity's embedding, rows in :attr:`qids` order, written as ``argus_embeddings.npz``)."""

    kind: Literal["argus_audit"]
    task: str
    version: One
    retriever: str
    encoder: AuditEncoder
    k: int = Field(ge=1)
    n_requested: int = Field(ge=2)
    n_effective: PoolSizes
    chance: Number  # mean over targets of min(k, N_eff) / N_eff: the RPS of a random ranking
    seed: int
    hit_rule: str
    relations: Literal["directed", "undirected"]
    n_entities: int
    n_targets: int
    n_pairs: int
    dropped: dict[str, int]
    grounding: Grounding
    mean_rps: Number
    frac_rps_gt_0_5: Number
    terciles: Terciles
    bands: BandCounts  # fixed bands [0, .33), [.33, .66), [.66, 1]
    warnings: list[str]
    entities: list[AuditEntity]

    _data: Any = PrivateAttr(default=None)
    _qids: list[str] = PrivateAttr(default_factory=list)
    _embeddings: Any = PrivateAttr(default=None)

    def holding(self, data: Any, qids: list[str], embeddings: Any) -> ArgusAudit:
        """This report with the data audited and every entity's embedding (an array, rows in ``qids`` order) kept in
        memory (not part of the file); returns the same object."""
        self._data, self._qids, self._embeddings = data, list(qids), embeddings
        return self

    @property
    def data(self) -> Any:
        """The :class:`~gapbench.analyses.argus.audit.inputs.AuditData` audited; None for a report read from a file."""
        return self._data

    @property
    def qids(self) -> list[str]:
        """The entities whose embeddings :attr:`embeddings` holds, in row order (empty for a report read from a
        file)."""
        return self._qids

    @property
    def embeddings(self) -> Any:
        """Every entity's embedding (a numpy array, rows in :attr:`qids` order); None for a report read from a file."""
        return self._embeddings

    @property
    def ranks(self) -> dict[str, list[int]]:
        """Target -> the target's rank for each of its queries (related entities), in relation order."""
        return {e.qid: list(e.ranks) for e in self.entities}

    @property
    def n_candidates(self) -> dict[str, list[int]]:
        """Target -> the candidate-set size (the target and its neutrals) ranked for each of its queries."""
        return {e.qid: list(e.n_candidates) for e in self.entities}

    def rps(self) -> dict[str, float]:
        """Target -> its RPS_k (``hit_rule``: rank <= k)."""
        return {e.qid: e.rps for e in self.entities}

    def target_embeddings(self) -> tuple[list[str], Any]:
        """The targets, in report order, and their embeddings' rows (needs the report the audit returned)."""
        if self._embeddings is None:
            raise ConfigError(f"this {self.task} audit report holds no embeddings (it was read from a file): use the "
                              "report gapbench.argus_audit returns, or read argus_embeddings.npz.")
        idx = {q: i for i, q in enumerate(self._qids)}
        targets = [e.qid for e in self.entities]
        return targets, self._embeddings[[idx[q] for q in targets]]


# ---------------------------------------------------------------- the probe (argus_probe.json)
class ClassMetrics(Model):
    """A classification view on test (sklearn, zero_division=0)."""

    accuracy: Number
    macro_precision: Number
    macro_recall: Number
    macro_f1: Number
    weighted_precision: Number
    weighted_recall: Number
    weighted_f1: Number


class BlindSpotMetrics(Model):
    """Blind spot (RPS < tau) or not, as a classification view."""

    tau: Number
    accuracy: Number
    macro_precision: Number
    macro_recall: Number
    macro_f1: Number
    weighted_precision: Number
    weighted_recall: Number
    weighted_f1: Number


class ProbeMetrics(Model):
    """Predictions of a probe (or a baseline) against the empirical RPS of the test split (Tables 1 and 3)."""

    n: int
    rmse: Number
    mae: Number
    pearson: Number | None  # null when a prediction or the truth is constant
    spearman: Number | None
    band_accuracy: Number
    band_macro_f1: Number
    bands: ClassMetrics | None = None  # absent in files written before the classification views
    blind_spot: BlindSpotMetrics | None = None


class ProbeFamily(Model):
    """A family's configuration selected on validation, and its test metrics."""

    params: Params
    validation_rmse: Number
    n_configs: int
    test: ProbeMetrics


class ProbeSelected(Model):
    family: str
    params: Params
    validation_rmse: Number


class ProbeSplit(Model):
    train: int
    validation: int
    test: int


class ProbeProtocol(Model):
    split: list[Number]  # train, validation, test shares, summing to 1
    rebalance_bins: int | None
    n_train_rows: int  # after rebalancing
    grids: GridSet
    tau: Number


class CalibrationBin(Model):
    n: int
    mean_predicted: Number | None  # null where the bin is empty
    mean_empirical: Number | None


class Residuals(Model):
    mean: Number
    median: Number
    std: Number
    hist: list[int]  # 2 * bins bins over [-1, 1]


class Calibration(Model):
    """Figure 7's data: joint density (empirical bin, predicted bin), binned means and residuals of the selected
    probe on test."""

    bins: int
    density: list[list[int]]
    binned: list[CalibrationBin]
    residuals: Residuals


class ProbeAuditSummary(Model):
    mean_rps: Number
    chance: Number
    n_effective_min: int


class ProbeDataset(Model):
    """One labelled set's probes (what ``train_probe`` reports; the command adds the set's name and its audit)."""

    fingerprint: str
    dim: int
    seed: int
    n: int
    rps_mean: Number
    split: ProbeSplit
    selection: str
    protocol: ProbeProtocol | None = None  # absent in files written before it
    selected: ProbeSelected
    families: dict[str, ProbeFamily]
    baselines: dict[str, ProbeMetrics]
    test: ProbeMetrics
    calibration: Calibration | None = None
    name: str | None = None
    audit: ProbeAuditSummary | None = None


class SavedProbe(Model):
    path: str | None = None  # where the command saved it; None in memory until the probe is saved
    dataset: str  # the name of the labelled set it was trained on


class ArgusProbe(Model):
    """``argus_probe.json``: the RPS probes trained on entity embeddings, selected on validation RMSE; the top level
    repeats the labelled set whose probe was saved (the one with the most entities), ``datasets`` holds every set.
    :func:`gapbench.argus_probe` returns it holding that set's trained probe in memory (:attr:`probe`)."""

    kind: Literal["argus_probe"]
    task: str
    version: One
    retriever: str
    fingerprint: str
    dim: int
    seed: int
    k: int
    n_requested: int
    saved_probe: SavedProbe
    split: ProbeSplit
    selection: str
    selected: ProbeSelected
    families: dict[str, ProbeFamily]
    baselines: dict[str, ProbeMetrics]
    test: ProbeMetrics
    datasets: list[ProbeDataset]

    _probe: Any = PrivateAttr(default=None)

    def holding(self, probe: Any) -> ArgusProbe:
        """This report with its trained probe kept in memory (not part of the file); returns the same object."""
        self._probe = probe
        return self

    @property
    def probe(self) -> Any:
        """The trained probe of the labelled set ``saved_probe`` names (``.save(folder)`` writes it), as
        :func:`gapbench.argus_probe` returned it; None for a report read from a file."""
        return self._probe


# ---------------------------------------------------------------- the sweep (sweep.json)
class SweepCell(Model):
    n: int
    k: int
    n_effective_min: int
    chance: Number
    mean_rps: Number
    frac_rps_gt_0_5: Number
    bands: dict[BandName, Number]


class SweepEntity(Model):
    qid: str
    label: str | None
    rps: list[list[Number]]  # [index of N][index of k]


class SweepRetriever(Model):
    retriever: str
    encoder: AuditEncoder
    cells: list[SweepCell]
    entities: list[SweepEntity]


class ArgusSweep(Model):
    """``sweep.json``: RPS per entity for every (N, k) and retriever (``gapbench argus sweep``)."""

    kind: Literal["argus_sweep"]
    version: One
    task: str
    seed: int
    n: list[int]
    k: list[int]
    fig_k: int
    hit_rule: Literal["rank <= k"]
    bands: dict[str, list[Number]]
    retrievers: list[SweepRetriever]

    _data: Any = PrivateAttr(default=None)
    _runs: list[Any] = PrivateAttr(default_factory=list)

    def holding(self, data: Any, runs: list[Any]) -> ArgusSweep:
        """This report with the data swept and each retriever's ranks and embeddings (``RetrieverSweep``, in the
        report's order) kept in memory (not part of the file); returns the same object."""
        self._data, self._runs = data, list(runs)
        return self

    @property
    def data(self) -> Any:
        """The :class:`~gapbench.analyses.argus.audit.inputs.AuditData` swept; None for a report read from a file."""
        return self._data

    @property
    def runs(self) -> list[Any]:
        """Each retriever's ranks and embeddings, in :attr:`retrievers` order (empty for a report read from a file)."""
        return self._runs


class DatasetInputs(Model):
    wikidata: str  # the dump read
    format: Literal["json", "ntriples", "relations"]  # how it was read (from its name)
    paragraphs: str  # the Wikipedia first paragraphs {qid, text}


class DatasetSettings(Model):
    targets: int | None = Field(ge=1)  # targets sampled (seeded); null: every eligible target
    candidates: int = Field(ge=2)  # N: the target and N-1 neutrals per (target, related tag)
    seed: int
    neutral_rule: str


class DatasetCounts(Model):
    paragraphs: int
    entities: int  # paragraph entities with an English label
    edges_kept: int
    targets_eligible: int  # entities with a claim to another entity
    targets: int
    pairs: int  # (target, related tag) pairs stored
    candidates: int
    candidates_min: int  # the fewest candidates of a pair (a small dataset caps N)


class DatasetDropped(Model):
    empty_paragraph: int
    no_english_label: int
    targets_without_related_entity: int
    targets_without_neutral: int


class ArgusDataset(Model):
    """``argus_dataset.json``: what ``gapbench argus dataset build`` read, kept and dropped."""

    kind: Literal["argus_dataset"]
    version: One
    inputs: DatasetInputs
    settings: DatasetSettings
    counts: DatasetCounts
    dropped: DatasetDropped


# the comparison's models live in their own module; imported here, where the ARGUS family's files are gathered
from .argus_compare import ArgusCompare, ArgusCompareTask, MaxRpsDelta, MaxRpsGroup  # noqa: E402,F401
