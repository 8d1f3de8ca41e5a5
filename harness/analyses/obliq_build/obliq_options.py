"""The one settings object of ``gapbench obliq build`` (:class:`ObliqBuildOptions`).

Every field is checked when the object is made (:class:`gapbench.contract.Options`; the counts by the contract's shared
types, :data:`~gapbench.contract.Positive`, :data:`~gapbench.contract.BatchSize`, :data:`~gapbench.contract.Depth`); an
error names the field (``ObliqBuildOptions: pool_depth must be greater than or equal to 1, got 0``), never a
command-line flag: the command line's flags are generated from these fields (:mod:`gapbench.cli.from_options`), each
field's description being its flag's help.

    options = ObliqBuildOptions(lens="the failure mode the assistant shows", out="my-task", sample=500, seed=1)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ...contract import BatchSize, Depth, Options, Positive, Seed
from ...errors import ConfigError

MODES = ("descriptive", "recollection")
LENS_FILE_SUFFIXES = (".txt", ".md")
# The lens goes into every annotation, query and judging prompt: a few sentences name an attribute; a longer text is
# a wrong file (a whole document given as the lens) and would be paid for in every call.
MAX_LENS_CHARS = 2000


class ObliqBuildOptions(Options):
    """How to build an OBLIQ-style task from a corpus (the stages are described in :mod:`.build`).

    ``lens``: the latent attribute in words (or, for ``mode="recollection"``, what a recollection should describe).
    ``labels``: a file of document id -> latent label (JSONL ``{"doc_id", "label"}`` or TSV ``doc_id<TAB>label``),
    which replaces annotation and collapse; ``labels_as``: ``queries`` (each label verbalised as a query, as a
    collapsed cluster would be) or ``documents`` (OBLIQ's Writing-Style: ``label_queries`` documents of each label serve
    as queries, the label's other documents are their gold, and the query document is excluded from its own ranking).
    ``mode``: ``descriptive`` (one query per cluster of documents sharing an attribute value) or ``recollection`` (one
    query per target passage, tip-of-the-tongue, opening styles varied).
    """

    lens: str = Field(description="The latent attribute, in words, or a .txt/.md file holding it.")
    out: Path = Field(description="The task folder to write (an earlier build's is resumed).")
    mode: Literal["descriptive", "recollection"] = Field(
        "descriptive", description="descriptive (a query per cluster) or recollection (a query per target passage).")
    labels: Path | None = Field(None, description="doc_id<TAB>label (or JSONL) file: skips annotation and collapse.")
    labels_as: Literal["queries", "documents"] = Field(
        "queries", description="queries (each label verbalised) or documents (a label's documents are queries).")
    label_queries: Positive = Field(1, description="With labels_as documents: queries per label.")
    max_docs: int | None = Field(None, description="Build from the first N documents.")
    sample: int | None = Field(None, description="Build from N documents drawn with the seed.")
    seed: Seed = Field(0, description="Seed of the document sample, the recollection targets and the LLM calls.")
    max_chars: Positive = Field(1500, description="Characters of a document shown to the LLM.")
    batch_size: BatchSize = Field(8, description="Documents per annotation call.")
    judge_batch: BatchSize = Field(10, description="Documents per judging call.")
    embedder: str = Field("dense", description="Dense adapter that embeds the values.")
    cluster_threshold: float = Field(0.35, description="Cosine distance joining values.")
    merge_threshold: float = Field(0.6, description="Cosine distance under which the LLM is asked to merge clusters.")
    min_cluster: Positive = Field(3, description="Fewest documents a cluster needs.")
    max_cluster: Positive = Field(200, description="Most documents a cluster may have.")
    max_queries: Positive = Field(200, description="Keep the N largest clusters.")
    regenerate: int = Field(2, description="Rewrites of a leaky query before it is dropped.")
    leak_df: float = Field(0.05, description="A word in at most this share of the corpus is rare.")
    leak_share: float = Field(0.5, description="A rare word in this share of a cluster's documents must not be in "
                                               "its query.")
    leak_bm25: float = Field(0.5, description="A query whose BM25 top-n holds this share of its n documents is "
                                              "leaky.")
    anchors: Positive = Field(3, description="Gold documents shown to the pool judge as reference.")
    pool_retrievers: tuple[str, ...] = Field(("bm25", "dense"), description="Retrievers pooled in stage 5 ('' for "
                                                                            "none).")
    pool_depth: Depth = Field(20, description="Each pool retriever's top k judged.")
    targets: Positive = Field(50, description="With mode recollection: target passages.")
    prompts: Path | None = Field(None, description="Folder of .txt templates overriding ours.")
    structured: Literal["auto", "json_schema", "json_object", "off"] = Field(
        "auto", description="auto, json_schema, json_object (llama-cpp-python) or off.")
    dry_run: bool = Field(False, description="Print the cost and time estimate and exit (short probe calls time it).")
    llm_base_url: str | None = Field(None, description="OpenAI-compatible endpoint.")
    llm_model: str | None = Field(None, description="Model name the endpoint serves.")
    llm_client: Any = Field(None, description="An LLM client object to use instead of an endpoint (Python only).")

    @field_validator("lens")
    @classmethod
    def _lens(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is empty; describe the latent attribute in words, e.g. 'the stance the "
                             "tweet implies without stating it', or give a .txt file holding it")
        if len(value.strip()) > MAX_LENS_CHARS:
            raise ValueError(f"is {len(value.strip()):,} characters long, over {MAX_LENS_CHARS:,}: it is sent with "
                             "every LLM call, so name the attribute in a few sentences")
        return value.strip()

    @field_validator("max_docs", "sample")
    @classmethod
    def _positive_or_none(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError(f"must be 1 or more documents, or unset for all, got {value}")
        return value

    @field_validator("regenerate")
    @classmethod
    def _regenerate(cls, value: int) -> int:
        if not 0 <= value <= 10:
            raise ValueError(f"must be 0 (no second try) to 10 regenerations of a leaky query, got {value}")
        return value

    @field_validator("cluster_threshold", "merge_threshold")
    @classmethod
    def _distance(cls, value: float) -> float:
        if not 0 < value <= 2:
            raise ValueError(f"must be a cosine distance in (0, 2], e.g. 0.35, got {value}")
        return value

    @field_validator("leak_df", "leak_share", "leak_bm25")
    @classmethod
    def _share(cls, value: float) -> float:
        if not 0 < value <= 1:
            raise ValueError(f"must be a share in (0, 1], got {value}")
        return value

    @field_validator("pool_retrievers")
    @classmethod
    def _retrievers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        value = tuple(v.strip() for v in value if v.strip())
        if len(set(value)) != len(value):
            raise ValueError(f"names a retriever twice; name each once, e.g. bm25,dense, got {list(value)}")
        return value

    @field_validator("embedder")
    @classmethod
    def _embedder(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is empty; name a dense adapter with an embed() method, e.g. 'dense'")
        return value.strip()

    @model_validator(mode="after")
    def _together(self) -> ObliqBuildOptions:
        if self.min_cluster > self.max_cluster:
            raise ValueError(f"min_cluster {self.min_cluster} is above max_cluster {self.max_cluster}; a cluster "
                             "must be able to pass both")
        if self.labels is not None and self.mode == "recollection":
            raise ValueError("labels and mode='recollection' do not go together: labels define clusters of "
                             "documents, a recollection targets one passage; give one of them")
        if self.labels is not None and not Path(self.labels).is_file():
            raise ValueError(f"labels file {str(self.labels)!r} does not exist; give a JSONL file of "
                             "{\"doc_id\": ..., \"label\": ...} lines or a TSV of doc_id<TAB>label")
        if self.prompts is not None and not Path(self.prompts).is_dir():
            raise ValueError(f"prompts folder {str(self.prompts)!r} does not exist; give a folder of .txt "
                             "templates named as the packaged ones (annotate.txt, ...)")
        return self

    @property
    def cluster_mode(self) -> bool:
        return self.mode == "descriptive"

    def settings(self) -> dict[str, Any]:
        """The settings the card records (JSON-ready; no client object)."""
        skip = {"llm_client", "out", "dry_run"}
        out: dict[str, Any] = {}
        for name in type(self).model_fields:
            if name in skip:
                continue
            value = getattr(self, name)
            out[name] = str(value) if isinstance(value, Path) else list(value) if isinstance(value, tuple) else value
        if out.get("llm_base_url"):
            from ...llm.client import redact_url

            out["llm_base_url"] = redact_url(out["llm_base_url"])  # user:password@ never reaches the card
        return out


def read_lens(text_or_file: str) -> str:
    """The lens given as text, or read from a ``.txt``/``.md`` file when the argument names an existing file."""
    path = Path(text_or_file).expanduser()
    try:
        is_file = path.suffix in LENS_FILE_SUFFIXES and path.is_file()
    except OSError:  # a long sentence is no file name
        is_file = False
    if not is_file:
        if text_or_file.endswith(LENS_FILE_SUFFIXES) and "\n" not in text_or_file and len(text_or_file) < 256 \
                and " " not in text_or_file:
            raise ConfigError(f"lens file {text_or_file!r} does not exist; give the lens as text, or an existing "
                              ".txt/.md file holding it.")
        return text_or_file
    from contextlib import closing

    from ...textio import text_lines

    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ConfigError(f"lens file {path} cannot be read ({exc.strerror or exc}); give a readable file.") from None
    if size > 4 * MAX_LENS_CHARS:  # read no further than a lens can be (a character is at most 4 bytes)
        raise ConfigError(f"lens file {path} holds {size:,} bytes; a lens is at most {MAX_LENS_CHARS:,} characters, "
                          "sent with every LLM call: name the attribute in a few sentences.")
    with closing(text_lines(path, 4 * MAX_LENS_CHARS)) as lines:
        text = "\n".join(line for _, line in lines)
    if not text.strip():
        raise ConfigError(f"lens file {path} is empty; write the latent attribute in it, in words.")
    return text
