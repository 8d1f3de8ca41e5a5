"""Reading Hugging Face datasets: from the hub at a pinned revision, or from a local copy in the repository's layout.

A local copy is a folder laid out as the dataset repository is (for example ``<dir>/examples/biology-*.parquet`` or
``<dir>/examples/biology.jsonl``); loaders take it as the task option ``data_dir=PATH``, or from the environment
variable ``GAPBENCH_DATA_<NAME>``. Offline, a hub read fails fast with a message naming the dataset and both ways to
provide a copy.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from gapbench.errors import ConfigError, DataFormatError, DatasetUnavailableError
from gapbench.formats import read_jsonl


def env_data_dir(short_name: str) -> str | None:
    return os.environ.get(f"GAPBENCH_DATA_{short_name.upper().replace('-', '_')}")


def beir_style_folder(root: Path, name: str, *, not_a_folder: str, absent: str) -> Path:
    """``root/name`` or ``root`` itself, whichever holds a BEIR-style ``corpus.jsonl`` (or .gz). A DataFormatError
    naming ``root`` says ``not_a_folder`` when it is no directory, ``absent`` when neither folder holds a corpus."""
    if not root.is_dir():
        raise DataFormatError(not_a_folder, path=root)
    for cand in (root / name, root):
        if (cand / "corpus.jsonl").exists() or (cand / "corpus.jsonl.gz").exists():
            return cand
    raise DataFormatError(absent, path=root)


def _local_files(root: Path, config: str, split: str) -> list[Path]:
    folder = root / config if config else root
    pats = [f"{split}.jsonl", f"{split}.jsonl.gz", f"{split}-*.parquet", f"{split}.parquet", f"{split}-*.jsonl"]
    for pat in pats:
        found = sorted(folder.glob(pat))
        if found:
            return found
    return []


def rows(dataset: str, config: str, split: str, revision: str, *, data_dir: str | None = None,
         short_name: str = "") -> Iterator[dict]:
    """Yield the records of ``dataset`` (config, split) as plain dicts."""
    data_dir = data_dir or (env_data_dir(short_name) if short_name else None)
    if data_dir:
        root = Path(data_dir).expanduser()
        if not root.is_dir():
            raise DataFormatError(f"data_dir for {dataset} is not a directory.", path=root)
        files = _local_files(root, config, split)
        if not files:
            raise DataFormatError(
                f"no files for config {config!r} split {split!r} of {dataset}: expected "
                f"{config + '/' if config else ''}{split}.jsonl or {split}-*.parquet, as in the dataset repository.",
                path=root,
            )
        for path in files:
            if path.suffix == ".parquet":
                yield from _parquet_rows(path)
            else:
                for _, obj in read_jsonl(path):
                    yield obj
        return
    env = f"GAPBENCH_DATA_{short_name.upper().replace('-', '_')}" if short_name else "data_dir"
    fix = (f"With hub access it downloads by itself; without, download the dataset repository elsewhere "
           f"(huggingface-cli download {dataset} --repo-type dataset --revision {revision or 'main'} --local-dir DIR) "
           f"and pass the task option data_dir=DIR or set {env}=DIR.")
    for rec in load_dataset(dataset, config, split, revision, feature=f"reading {dataset} from the hub", fix=fix):
        yield dict(rec)


def load_dataset(dataset: str, config: str | None, split: str, revision: str | None, *, feature: str, fix: str):
    """``datasets.load_dataset`` with gapbench's errors: a ConfigError naming the pip extra when ``datasets`` is not
    installed (``feature`` says what needs it); a DatasetUnavailableError naming the dataset, config, split, revision
    and the hub's reason, then ``fix`` (how to go on without hub access), when the load fails.

    >>> rows = load_dataset("BeIR/scifact", "corpus", "corpus", "main", feature="source=hf",  # doctest: +SKIP
    ...                     fix="Without hub access pass data_dir=DIR.")
    """
    try:
        import datasets
    except ImportError:
        raise ConfigError(f"{feature} needs the package 'datasets': pip install 'gapbench[hub]'.") from None
    try:
        return datasets.load_dataset(dataset, name=config or None, split=split, revision=revision)
    except Exception as exc:  # the hub client raises many types (connection, offline mode, missing revision)
        raise DatasetUnavailableError(
            f"cannot load the Hugging Face dataset {dataset} (config {config or '-'}, split {split}, revision "
            f"{revision[:12] if revision else 'main'}): {type(exc).__name__}: {first_line(exc)}. {fix}"
        ) from None


def first_line(exc: BaseException, width: int = 160) -> str:
    """The first line of an exception's message, cut to ``width`` characters; '' when it has no message."""
    return (str(exc).splitlines() or [""])[0][:width]


def _parquet_rows(path: Path) -> Iterator[dict]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError("reading parquet files needs 'pyarrow' (installed with 'datasets': pip install "
                          "'gapbench[hub]').") from None
    table = pq.read_table(path)
    yield from table.to_pylist()
