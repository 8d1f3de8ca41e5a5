"""Scale: `gapbench run` on synthetic BEIR folders of millions of documents, peak RSS and wall time beside the raw
libraries, each measurement in its own process.

Data: a seeded BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) of N documents of 20-120 words drawn from a
Zipf-Mandelbrot vocabulary of 150,000 made-up words (none an English stopword), and 200 queries of 4 words, each taken
from one document (distinct words, drawn alike), which is its one relevant document. Generated with numpy in
large buffered writes (about 25 s and 575 MB per million documents) and kept under ``--data-dir`` by (N, seed).

Measured, each as a child process whose peak RSS is ``os.wait4``'s ``ru_maxrss`` and whose wall time is taken around
it (so interpreter start and imports count on both sides), started through a small launcher process (see
``LAUNCHER``):
    gapbench bm25       gapbench run FOLDER -r bm25 --k 1000 -m nDCG@10 --json, fresh GAPBENCH_HOME (cold)
    gapbench bm25 again the same command with the same GAPBENCH_HOME (index and compact corpus from the cache)
    raw bm25s           json.loads every line, bm25s.tokenize, BM25().index, retrieve top-1000 (show_progress=False)
    gapbench dense      gapbench run FOLDER -r dense --k 1000 -m nDCG@10 --json, the embedding cache pre-filled with
                        seeded random unit vectors (written by an unmeasured process through
                        Dense.embedding_cache(corpus), in the cache's own layout); the queries are encoded by the model
                        (random document vectors: its nDCG@10 means nothing); the pre-filling process's memo of
                        the corpus' length order and texts' key is removed first, so this run reads every text
    gapbench dense again the same command once more: the memo (cache kind dense-memo) spares it reading any text
    raw numpy           SentenceTransformer.encode(queries), every cached chunk loaded into one matrix, blocked
                        q @ D.T with argpartition top-1000
Raw sides that would not fit this machine's memory are skipped, with the estimate printed (raw bm25s holds about
3.3 KB per document; raw numpy 4 x dim bytes per document); ``--force-raw`` runs them anyway, ``--skip-raw`` never.

Each result is appended to a JSON lines file (``--jsonl``) as soon as it is measured, so a killed 10M run keeps what
it measured; ``--resume`` takes measurements already in that file instead of repeating them.

    python benchmarks/bench_scale.py --sizes 20k                 # a quick check, about a minute
    python benchmarks/bench_scale.py --sizes 1M,10M              # the issue's sizes (hours on 2 cores)
    python benchmarks/bench_scale.py --sizes 1M --only bm25 --memory-budget 1GB
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

VERSION = 3  # bump when the generator changes: it names the cached folders
VOCAB = 150_000
ZIPF = 1.07
LENGTHS = (20, 120)
N_QUERIES = 200
CHUNK_DOCS = 50_000
K = 1000
RAW_BM25S_BYTES_PER_DOC = 3300  # peak RSS of raw bm25s per document, measured at 200k and 1M documents
TARGET_10M_GIB = 12.0
# issue 30 part 5: bm25 over 10M documents on a 2-core machine, end to end (the cold run)
TARGET_10M_WALL_S, TARGET_10M_GB = 600.0, 6.0
TODAY_1M_GB = 3.5  # gapbench bm25 at 1M documents before issue 13 (the measurement)
TARGET_RSS_RATIO, TARGET_TIME_RATIO = 0.6, 1.15
HERE = Path(__file__).resolve().parent


# ---------------------------------------------------------------- data

def parse_size(text: str) -> int:
    """``20k``, ``1M``, ``1.5M`` or ``200000``."""
    text = text.strip()
    scale = {"k": 10**3, "K": 10**3, "m": 10**6, "M": 10**6}.get(text[-1:], 1)
    return int(round(float(text[:-1] if scale > 1 else text) * scale))


def size_label(n: int) -> str:
    for unit, scale in (("M", 10**6), ("k", 10**3)):
        if n >= scale and n % (scale // 10) == 0:
            return f"{n / scale:g}{unit}"
    return str(n)


def make_vocab(n_words: int, rng: np.random.Generator) -> list[bytes]:
    """Distinct made-up lowercase words of 3-10 letters, none an English stopword (bm25s would drop it)."""
    import bm25s.stopwords

    banned = {w.encode() for w in bm25s.stopwords.STOPWORDS_EN}
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
    words: list[bytes] = []
    seen: set[bytes] = set()
    while len(words) < n_words:
        lengths = rng.integers(3, 11, size=2 * (n_words - len(words)))
        flat = letters[rng.integers(0, 26, size=int(lengths.sum()))].tobytes()
        ends = np.cumsum(lengths)
        for lo, hi in zip(ends - lengths, ends):
            w = flat[lo:hi]
            if w not in seen and w not in banned:
                seen.add(w)
                words.append(w)
                if len(words) == n_words:
                    break
    return words


class Vocabulary:
    """Words as one byte buffer (each followed by a space) and the Zipf-Mandelbrot cumulative distribution."""

    def __init__(self, seed: int) -> None:
        words = make_vocab(VOCAB, np.random.default_rng([seed, 0]))
        self.words = words
        self.flat = np.frombuffer(b"".join(w + b" " for w in words), dtype=np.uint8)
        self.length = np.array([len(w) + 1 for w in words], dtype=np.int64)
        self.start = np.cumsum(self.length) - self.length
        weights = 1.0 / (np.arange(1, VOCAB + 1) + 2.7) ** ZIPF
        self.cdf = np.cumsum(weights / weights.sum())

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.minimum(np.searchsorted(self.cdf, rng.random(n), side="right"), VOCAB - 1)

    def spell(self, tokens: np.ndarray) -> np.ndarray:
        """The bytes of ``tokens``, each word followed by a space (a ragged gather in one numpy expression)."""
        lengths = self.length[tokens]
        out_start = np.cumsum(lengths) - lengths
        shift = np.repeat(self.start[tokens] - out_start, lengths)
        return self.flat[np.arange(int(lengths.sum()), dtype=np.int64) + shift]


def _corpus_chunk(vocab: Vocabulary, seed: int, chunk: int, lo: int, hi: int, targets: dict[int, int]):
    """(corpus.jsonl lines of documents lo..hi, {query number: tokens of its document})."""
    rng = np.random.default_rng([seed, 1, chunk])
    lengths = rng.integers(LENGTHS[0], LENGTHS[1] + 1, size=hi - lo)
    tokens = vocab.sample(rng, int(lengths.sum()))
    text = vocab.spell(tokens).tobytes()
    tok_end = np.cumsum(lengths)
    byte_end = np.cumsum(vocab.length[tokens])[tok_end - 1]
    byte_start = np.concatenate(([0], byte_end[:-1]))
    lines = [b'{"_id": "d%d", "title": "", "text": "%s"}\n' % (lo + j, text[s:e - 1])  # no trailing space
             for j, (s, e) in enumerate(zip(byte_start.tolist(), byte_end.tolist()))]
    found = {q: tokens[tok_end[d - lo] - lengths[d - lo]:tok_end[d - lo]] for d, q in targets.items() if lo <= d < hi}
    return b"".join(lines), found


def _query_words(vocab: Vocabulary, tokens: np.ndarray, rng: np.random.Generator) -> str:
    """Four distinct words of a document, drawn alike: mostly frequent words, so the task is not trivially solved."""
    return " ".join(vocab.words[t].decode() for t in rng.permutation(np.unique(tokens))[:4])


def generate(n_docs: int, seed: int, folder: Path) -> None:
    """Write the BEIR folder into a hidden sibling and rename it into place, so a killed run leaves no half folder."""
    tmp = folder.with_name(f".{folder.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "qrels").mkdir(parents=True)
    vocab = Vocabulary(seed)
    qrng = np.random.default_rng([seed, 2])
    picked = qrng.choice(n_docs, size=min(N_QUERIES, n_docs), replace=False)
    targets = {int(d): q for q, d in enumerate(picked)}
    doc_tokens: dict[int, np.ndarray] = {}
    with open(tmp / "corpus.jsonl", "wb", buffering=16 << 20) as fh:
        for chunk, lo in enumerate(range(0, n_docs, CHUNK_DOCS)):
            lines, found = _corpus_chunk(vocab, seed, chunk, lo, min(n_docs, lo + CHUNK_DOCS), targets)
            fh.write(lines)
            doc_tokens.update(found)
    with open(tmp / "queries.jsonl", "w", encoding="utf-8") as fh:
        for q in range(len(picked)):
            fh.write(json.dumps({"_id": f"q{q}", "text": _query_words(vocab, doc_tokens[q], qrng)}) + "\n")
    with open(tmp / "qrels" / "test.tsv", "w", encoding="utf-8") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        fh.writelines(f"q{q}\td{d}\t1\n" for q, d in enumerate(picked.tolist()))
    meta = {"n_docs": n_docs, "seed": seed, "version": VERSION, "vocab": VOCAB, "zipf": ZIPF, "lengths": LENGTHS,
            "n_queries": len(picked)}
    (tmp / "meta.json").write_text(json.dumps(meta) + "\n")
    os.replace(tmp, folder)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(data_dir: Path) -> None:
    """Remove what killed runs left in ``data_dir``: half-generated folders and work folders (caches of many GB)."""
    if not data_dir.is_dir():
        return
    for entry in data_dir.iterdir():
        m = re.fullmatch(r"\.(?:beir-.+\.tmp|scale-[^-]+-)([0-9]+)(?:-.*)?", entry.name)
        if m and entry.is_dir() and not _alive(int(m[1])):
            shutil.rmtree(entry, ignore_errors=True)


def dataset(n_docs: int, seed: int, data_dir: Path) -> Path:
    """The cached folder for (n_docs, seed), generated on first use."""
    folder = data_dir / f"beir-{size_label(n_docs)}-s{seed}-v{VERSION}"
    if not (folder / "meta.json").exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        generate(n_docs, seed, folder)
        print(f"  generated {folder} in {time.perf_counter() - t0:.1f} s", flush=True)
    return folder


# ---------------------------------------------------------------- workers (run as child processes)

def worker_raw_bm25s(folder: Path, k: int, out: Path) -> None:
    import bm25s

    texts = []
    with open(folder / "corpus.jsonl", "rb") as fh:
        for line in fh:
            d = json.loads(line)
            texts.append(f"{d['title']} {d['text']}" if d.get("title") else d["text"])
    qids, queries = _read_queries(folder)
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, show_progress=False), show_progress=False)
    idx, scores = retriever.retrieve(bm25s.tokenize(queries, show_progress=False), k=min(k, len(texts)),
                                     show_progress=False)
    _write_top10(out, qids, idx, scores)


def worker_prefill_dense(folder: Path, seed: int, out: Path) -> None:
    from gapbench.retrieval import get_retriever
    from gapbench.task import get_task

    corpus = get_task(str(folder)).load().corpus
    dense = get_retriever("dense")
    dim = dense._load().get_sentence_embedding_dimension()
    cache = dense.embedding_cache(corpus)
    prepare = getattr(cache, "prepare", None)
    if prepare is not None:
        prepare()
    for i in range(cache.n_chunks):
        lo, hi = cache.chunk_range(i)
        vectors = np.random.default_rng([seed, 3, i]).standard_normal((hi - lo, dim), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        cache.write_chunk(i, vectors)
    files = [str(cache.chunk_path(i)) for i in range(cache.n_chunks)]
    out.write_text(json.dumps({"dim": dim, "rows": len(corpus), "files": files}))


def worker_raw_numpy(folder: Path, files: Path, k: int, out: Path) -> None:
    from sentence_transformers import SentenceTransformer

    from gapbench.adapters.dense import DEFAULT_MODEL, resolve_model

    meta = json.loads(files.read_text())
    qids, queries = _read_queries(folder)
    model = SentenceTransformer(resolve_model(DEFAULT_MODEL), device="cpu")
    q = model.encode(queries, batch_size=64, normalize_embeddings=True, convert_to_numpy=True).astype(np.float32)
    docs = np.empty((meta["rows"], meta["dim"]), dtype=np.float32)
    row = 0
    for path in meta["files"]:
        chunk = np.load(path)
        docs[row:row + len(chunk)] = chunk
        row += len(chunk)
    k = min(k, len(docs))
    best_idx = np.zeros((len(q), 0), dtype=np.int64)
    best = np.zeros((len(q), 0), dtype=np.float32)
    for lo in range(0, len(docs), 262_144):
        scores = q @ docs[lo:lo + 262_144].T
        part = np.argpartition(-scores, min(k, scores.shape[1]) - 1, axis=1)[:, :k]
        best = np.concatenate([best, np.take_along_axis(scores, part, axis=1)], axis=1)
        best_idx = np.concatenate([best_idx, part + lo], axis=1)
        keep = np.argpartition(-best, min(k, best.shape[1]) - 1, axis=1)[:, :k]
        best, best_idx = np.take_along_axis(best, keep, axis=1), np.take_along_axis(best_idx, keep, axis=1)
    order = np.argsort(-best, axis=1, kind="stable")
    _write_top10(out, qids, np.take_along_axis(best_idx, order, axis=1), np.take_along_axis(best, order, axis=1))


def _read_queries(folder: Path) -> tuple[list[str], list[str]]:
    with open(folder / "queries.jsonl", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    return [r["_id"] for r in rows], [r["text"] for r in rows]


def _write_top10(out: Path, qids: list[str], idx: np.ndarray, scores: np.ndarray) -> None:
    """The raw side's top 10 per query, as rows of the corpus (document ``d{row}``) and scores."""
    top = {q: [[f"d{int(i)}", float(s)] for i, s in zip(idx[n, :10], scores[n, :10])] for n, q in enumerate(qids)}
    out.write_text(json.dumps(top))


# ---------------------------------------------------------------- measuring

# The measured command is started by this small launcher, not by the benchmark itself: Linux carries a process's peak
# RSS over fork and exec into its child's ru_maxrss, so a child of the benchmark (which holds the vocabulary and the
# last generated chunk) would report at least the benchmark's own peak. The launcher's peak is ~15 MB on every side.
LAUNCHER = """import json, os, subprocess, sys, time
t0 = time.perf_counter()
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
wall = time.perf_counter() - t0
proc.returncode = os.waitstatus_to_exitcode(status)
with open(sys.argv[1], "w") as fh:
    json.dump({"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "maxrss_kib": usage.ru_maxrss,
               "rc": proc.returncode}, fh)
"""


def measure(cmd: list[str], env: dict[str, str], logs: Path, label: str) -> dict:
    """Run ``cmd`` to its end: wall seconds, CPU seconds (user + system, ``os.wait4``: what the command itself
    computed, which other processes on a busy machine do not inflate as they do the wall time), peak RSS
    (``ru_maxrss``), exit code, its stdout."""
    logs.mkdir(parents=True, exist_ok=True)
    out_path, err_path, usage_path = (logs / f"{label}.{ext}" for ext in ("out", "err", "usage.json"))
    usage_path.unlink(missing_ok=True)
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        subprocess.run([sys.executable, "-c", LAUNCHER, str(usage_path), *cmd], stdout=out, stderr=err, env=env)
    if not usage_path.exists():  # the launcher itself failed (the command could not be started)
        return {"wall_s": 0.0, "peak_rss_gb": 0.0, "rc": -1, "stdout": "",
                "stderr_tail": err_path.read_text(errors="replace")[-2000:]}
    usage = json.loads(usage_path.read_text())
    result = {"wall_s": round(usage["wall_s"], 3), "cpu_s": round(usage["cpu_s"], 3),
              "peak_rss_gb": round(usage["maxrss_kib"] * 1024 / 1e9, 4),
              "rc": usage["rc"], "stdout": out_path.read_text(errors="replace")[-4000:]}
    if usage["rc"] != 0:
        result["stderr_tail"] = err_path.read_text(errors="replace")[-2000:]
    return result


def child_env(home: Path) -> dict[str, str]:
    env = dict(os.environ, GAPBENCH_HOME=str(home), HF_HUB_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH", "")]))
    return env


def gapbench_cmd(folder: Path, retriever: str, budget: str | None) -> list[str]:
    cmd = [sys.executable, "-m", "gapbench", "run", str(folder), "-r", retriever, "--k", str(K), "-m", "nDCG@10",
           "--json"]
    return cmd + (["--memory-budget", budget] if budget else [])


def worker_cmd(name: str, *args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--worker", name, *args]


def ndcg_of_gapbench(result: dict) -> float | None:
    try:
        return json.loads(result["stdout"].strip().splitlines()[-1])["measures"]["nDCG@10"]
    except (ValueError, KeyError, IndexError):
        return None


def ndcg_of_raw(top10: Path, folder: Path) -> float | None:
    """nDCG@10 of a raw side's top 10 under gapbench's tie rule, evaluated as gapbench evaluates its own run."""
    import gapbench
    from gapbench.formats import read_qrels

    if not top10.exists():
        return None
    run = {q: {d: s for d, s in ranking} for q, ranking in json.loads(top10.read_text()).items()}
    qrels = read_qrels(folder / "qrels" / "test.tsv")
    return gapbench.evaluate(run, qrels, ["nDCG@10"]).means["nDCG@10"]


class Ledger:
    """The JSON lines file each measurement is appended to the moment it is known (and, with resume, read from)."""

    def __init__(self, path: Path, resume: bool) -> None:
        self.path = path
        self.done: dict[tuple, dict] = {}
        if resume and path.exists():
            for line in path.read_text().splitlines():
                rec = json.loads(line)
                self.done[self.key(rec)] = rec

    @staticmethod
    def key(rec: dict) -> tuple:
        return rec["n_docs"], rec["seed"], rec["system"], rec.get("memory_budget")

    def add(self, rec: dict) -> dict:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.done[self.key(rec)] = rec
        return rec


# ---------------------------------------------------------------- one size

def mem_total_gb() -> float:
    try:
        with open("/proc/meminfo") as fh:
            kib = next(int(line.split()[1]) for line in fh if line.startswith("MemTotal:"))
        return kib * 1024 / 1e9
    except (OSError, StopIteration):
        return float("inf")


def raw_skip_reason(system: str, need_gb: float, args) -> str | None:
    """Why a raw side is not run (None: run it). It is held whole in memory, so past the machine's memory it would
    only be killed, taking the machine's other work with it."""
    if args.skip_raw:
        return "--skip-raw"
    limit = 0.75 * mem_total_gb()
    if need_gb > limit and not args.force_raw:
        return (f"{system} would need about {need_gb:.0f} GB, more than 75% of this machine's {mem_total_gb():.0f} GB; "
                "--force-raw runs it anyway")
    return None


class SizeRun:
    """The measurements of one corpus size, in a private work folder (caches, logs) removed at the end."""

    def __init__(self, n_docs: int, folder: Path, args, ledger: Ledger) -> None:
        self.n, self.folder, self.args, self.ledger = n_docs, folder, args, ledger
        self.work = Path(tempfile.mkdtemp(prefix=f".scale-{size_label(n_docs)}-{os.getpid()}-", dir=args.data_dir))
        self.rows: list[dict] = []

    def base(self, system: str) -> dict:
        return {"n_docs": self.n, "seed": self.args.seed, "system": system, "memory_budget": self.args.memory_budget,
                "k": K}

    def record(self, system: str, run, skip: str | None = None) -> dict:
        rec = self.ledger.done.get(Ledger.key(self.base(system)))
        if skip is not None:
            rec = {**self.base(system), "skipped": skip}
            print(f"  {system:20s} skipped: {skip}", flush=True)
        elif rec is not None:
            print(f"  {system:20s} {rec['wall_s']:9.1f} s {rec['peak_rss_gb']:7.2f} GB  (from {self.ledger.path})")
        else:
            rec = self.ledger.add({**self.base(system), **run(), "date": time.strftime("%Y-%m-%dT%H:%M:%S")})
            status = "" if rec["rc"] == 0 else f"  FAILED rc={rec['rc']}: {rec.get('stderr_tail', '')[-600:]}"
            print(f"  {system:20s} {rec['wall_s']:9.1f} s {rec['peak_rss_gb']:7.2f} GB {_cpu(rec)}{status}", flush=True)
        self.rows.append(rec)
        return rec

    def needed(self, *systems: str) -> bool:
        return any(Ledger.key(self.base(s)) not in self.ledger.done for s in systems)

    def bm25(self) -> None:
        home, logs = self.work / "home-bm25", self.work / "logs"
        for system, label in (("gapbench bm25", "cold"), ("gapbench bm25 again", "warm")):
            self.record(system, lambda: self._gapbench(home, "bm25", label))
        raw_out = self.work / "raw-bm25s.json"
        skip = raw_skip_reason("raw bm25s", self.n * RAW_BM25S_BYTES_PER_DOC / 1e9, self.args)

        def raw() -> dict:
            res = measure(worker_cmd("raw-bm25s", "--folder", str(self.folder), "--out", str(raw_out)),
                          child_env(home), logs, "raw-bm25s")
            return {**res, "ndcg@10": ndcg_of_raw(raw_out, self.folder)}

        self.record("raw bm25s", raw, skip)

    def _gapbench(self, home: Path, retriever: str, label: str) -> dict:
        res = measure(gapbench_cmd(self.folder, retriever, self.args.memory_budget), child_env(home),
                      self.work / "logs", f"gapbench-{retriever}-{label}")
        return {**res, "ndcg@10": ndcg_of_gapbench(res)}

    def dense(self) -> None:
        systems = ("gapbench dense", "gapbench dense again", "raw numpy")
        if not self.needed(*systems):
            for system in systems:
                self.record(system, None)
            return
        home, files = self.work / "home-dense", self.work / "dense-cache.json"
        t0 = time.perf_counter()
        pre = measure(worker_cmd("prefill-dense", "--folder", str(self.folder), "--seed", str(self.args.seed),
                                 "--out", str(files)), child_env(home), self.work / "logs", "prefill-dense")
        if pre["rc"] != 0:
            why = pre.get("stderr_tail", "").strip().splitlines()[-1:] or ["no message"]
            for system in systems:
                self.record(system, None, f"pre-filling the embedding cache failed: {why[0][:300]}")
            return
        print(f"  (embedding cache pre-filled with random unit vectors in {time.perf_counter() - t0:.1f} s, "
              "not measured)", flush=True)
        shutil.rmtree(home / "cache" / "dense-memo", ignore_errors=True)  # the first run reads every text
        self.record("gapbench dense", lambda: self._gapbench(home, "dense", "cached"))
        self.record("gapbench dense again", lambda: self._gapbench(home, "dense", "memo"))
        dim = json.loads(files.read_text())["dim"]
        skip = raw_skip_reason("raw numpy", self.n * dim * 4 * 1.05 / 1e9, self.args)
        self.record("raw numpy", lambda: measure(
            worker_cmd("raw-numpy", "--folder", str(self.folder), "--files", str(files), "--out",
                       str(self.work / "raw-numpy.json")), child_env(home), self.work / "logs", "raw-numpy"), skip)

    def close(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)


# ---------------------------------------------------------------- report

RAW_OF = {"gapbench bm25": "raw bm25s", "gapbench bm25 again": "raw bm25s", "gapbench dense": "raw numpy",
          "gapbench dense again": "raw numpy"}


def _cpu(rec: dict) -> str:
    """The CPU seconds of a record (user + system), or "-" for one measured before they were recorded."""
    cpu = rec.get("cpu_s")
    return f"{cpu:9.1f} s CPU" if cpu is not None else "        - s CPU"


def _ok(rec: dict | None) -> bool:
    return rec is not None and "skipped" not in rec and rec.get("rc") == 0


def table(rows: list[dict]) -> str:
    head = (f"{'size':>6}  {'system':20s} {'wall s':>9} {'CPU s':>8} {'peak RSS GB':>11} {'wall/raw':>8} "
            f"{'RSS/raw':>8} {'nDCG@10':>8}")
    lines = [head, "-" * len(head)]
    by_key = {(r["n_docs"], r["system"]): r for r in rows}
    for r in rows:
        size = size_label(r["n_docs"])
        if not _ok(r):
            why = r.get("skipped") or f"failed (rc={r.get('rc')})"
            lines.append(f"{size:>6}  {r['system']:20s} {why}")
            continue
        raw = by_key.get((r["n_docs"], RAW_OF.get(r["system"], "")))
        ratios = (f"{r['wall_s'] / raw['wall_s']:8.2f} {r['peak_rss_gb'] / raw['peak_rss_gb']:8.2f}" if _ok(raw)
                  else f"{'-':>8} {'-':>8}")
        ndcg = r.get("ndcg@10")
        cpu = f"{r['cpu_s']:8.1f}" if r.get("cpu_s") is not None else f"{'-':>8}"
        lines.append(f"{size:>6}  {r['system']:20s} {r['wall_s']:9.1f} {cpu} {r['peak_rss_gb']:11.2f} {ratios} "
                     f"{'-' if ndcg is None else f'{ndcg:.4f}':>8}")
    return "\n".join(lines)


def verdicts(rows: list[dict]) -> list[str]:
    """The issue's targets, judged where this run measured them."""
    by_key = {(r["n_docs"], r["system"]): r for r in rows}
    out = []
    gb, raw = by_key.get((10**6, "gapbench bm25")), by_key.get((10**6, "raw bm25s"))
    if _ok(gb):
        limit = TARGET_RSS_RATIO * TODAY_1M_GB
        verdict = "PASS" if gb["peak_rss_gb"] <= limit else "MISS"
        out.append(f"{verdict}: bm25 at 1M peak RSS {gb['peak_rss_gb']:.2f} GB "
                   f"(target <= {TARGET_RSS_RATIO} x {TODAY_1M_GB} GB = {limit:.2f} GB)")
        if _ok(raw):
            ratio = gb["wall_s"] / raw["wall_s"]
            out.append(f"{'PASS' if ratio <= TARGET_TIME_RATIO else 'MISS'}: bm25 at 1M wall time {ratio:.3f} x raw "
                       f"bm25s ({gb['wall_s']:.1f} s vs {raw['wall_s']:.1f} s; target <= {TARGET_TIME_RATIO})")
    gb = by_key.get((10**7, "gapbench bm25"))
    if _ok(gb):
        gib = gb["peak_rss_gb"] * 1e9 / 2**30
        out.append(f"{'PASS' if gib <= TARGET_10M_GIB else 'MISS'}: bm25 at 10M peak RSS {gib:.2f} GiB "
                   f"(target <= {TARGET_10M_GIB:g} GiB)")
        out.append(f"{'PASS' if gb['wall_s'] <= TARGET_10M_WALL_S else 'MISS'}: bm25 at 10M end to end "
                   f"{gb['wall_s']:.1f} s (target <= {TARGET_10M_WALL_S:g} s on 2 cores, issue 30)")
        out.append(f"{'PASS' if gb['peak_rss_gb'] <= TARGET_10M_GB else 'MISS'}: bm25 at 10M peak RSS "
                   f"{gb['peak_rss_gb']:.2f} GB (target <= {TARGET_10M_GB:g} GB, issue 30)")
    return out


# ---------------------------------------------------------------- main

def run_worker(args) -> int:
    if args.worker == "raw-bm25s":
        worker_raw_bm25s(args.folder, K, args.out)
    elif args.worker == "prefill-dense":
        worker_prefill_dense(args.folder, args.seed, args.out)
    elif args.worker == "raw-numpy":
        worker_raw_numpy(args.folder, args.files, K, args.out)
    else:
        raise SystemExit(f"unknown worker {args.worker!r}")
    return 0


def parse_args(argv: list[str] | None):
    import gapbench.cache

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1M,10M", help="corpus sizes, e.g. 20k,200k or 1M,10M")
    ap.add_argument("--only", choices=("bm25", "dense"), help="measure one retriever (default: both)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", type=Path, default=gapbench.cache.home() / "bench",
                    help="where generated folders are kept by (size, seed) (default: GAPBENCH_HOME/bench)")
    ap.add_argument("--memory-budget", help="passed to gapbench run --memory-budget (default: gapbench's own)")
    ap.add_argument("--skip-raw", action="store_true", help="measure gapbench only")
    ap.add_argument("--force-raw", action="store_true", help="run raw sides even past this machine's memory")
    ap.add_argument("--jsonl", type=Path, help="append results here (default: DATA_DIR/bench_scale.jsonl)")
    ap.add_argument("--resume", action="store_true", help="take measurements already in --jsonl, run the rest")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--files", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return run_worker(args)
    import bm25s

    import gapbench
    from _common import load_note

    sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    args.data_dir = args.data_dir.expanduser().resolve()
    ledger = Ledger(args.jsonl or args.data_dir / "bench_scale.jsonl", args.resume)
    sweep_stale(args.data_dir)
    print(f"start: {load_note()}")
    print(f"bench_scale: sizes {', '.join(map(size_label, sizes))}, seed {args.seed}, k={K}, {N_QUERIES} queries, "
          f"vocab {VOCAB}, zipf {ZIPF}, memory budget {args.memory_budget or 'gapbench default'}")
    print(f"gapbench {gapbench.__version__}, bm25s {bm25s.__version__}, numpy {np.__version__}, cpus {os.cpu_count()}, "
          f"memory {mem_total_gb():.1f} GB, data {args.data_dir}, results appended to {ledger.path}", flush=True)
    rows: list[dict] = []
    for n in sizes:
        print(f"{size_label(n)} documents:", flush=True)
        run = SizeRun(n, dataset(n, args.seed, args.data_dir), args, ledger)
        try:
            if args.only in (None, "bm25"):
                run.bm25()
            if args.only in (None, "dense"):
                run.dense()
        finally:
            rows.extend(run.rows)
            run.close()
    print()
    print(table(rows))
    for line in verdicts(rows):
        print(line)
    print(f"end: {load_note()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
