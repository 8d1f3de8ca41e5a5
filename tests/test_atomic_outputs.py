"""Every output file goes through one atomic writer: an exception half way through a text, figure or array leaves the
earlier file and no temporary; what a killed process left is swept by the next writer into that folder (a live
writer's temporary is kept); the embedding cache resumes at the chunk a killed encoding was writing."""

from __future__ import annotations

import gzip
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from matplotlib.artist import Artist  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from gapbench.cache import EmbeddingCache  # noqa: E402
from gapbench.errors import ConfigError, DatasetUnavailableError  # noqa: E402
from gapbench.files import (atomic_writer, output_folder, save_figure_atomic,  # noqa: E402
                            write_bytes_atomic, write_text_atomic)
from gapbench.analyses.gap import GapReport, save_report  # noqa: E402
from gapbench.types import Corpus, Document, Queries, Query  # noqa: E402


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: its pid names no process now
    return proc.pid


def _interrupt(folder: Path, seen: list):
    """Note what the folder holds at this moment of the write, then stop it as Ctrl-C would."""
    seen.append(sorted(os.listdir(folder)))
    raise KeyboardInterrupt


# ---------------------------------------------------------------- an exception half way through a write

class _Tripwire(Artist):
    def __init__(self, hook) -> None:
        super().__init__()
        self.hook = hook

    def draw(self, renderer) -> None:
        self.hook()


class _Unpicklable:
    def __init__(self, hook) -> None:
        self.hook = hook

    def __reduce__(self):
        self.hook()


def _figure(*extra: Artist) -> Figure:
    fig = Figure(figsize=(3, 2), dpi=50)
    fig.add_subplot().plot([0, 1, 2], [2, 0, 1])
    for artist in extra:
        fig.add_artist(artist)
    return fig


def _json_then_interrupt(path: Path, hook) -> None:
    with atomic_writer(path) as fh:
        # json.dump writes '{"first": 1, "second": ' before it asks for the value it cannot encode
        json.dump({"first": 1, "second": object()}, fh, default=lambda _: hook())


def _png_then_interrupt(path: Path, hook) -> None:
    save_figure_atomic(_figure(_Tripwire(hook)), path)


def _npz_then_interrupt(path: Path, hook) -> None:
    with atomic_writer(path, binary=True) as fh:
        np.savez(fh, emb=np.ones((2000, 64), dtype=np.float32), bad=np.array([_Unpicklable(hook)], dtype=object))


def _npz(path: Path) -> None:
    with atomic_writer(path, binary=True) as fh:
        np.savez(fh, emb=np.zeros((3, 4), dtype=np.float32))


WRITES = {
    "json": ("result.json", lambda p: write_text_atomic(p, '{"first": 0}'), _json_then_interrupt),
    "png": ("plot.png", lambda p: save_figure_atomic(_figure(), p), _png_then_interrupt),
    "npz": ("embeddings.npz", lambda p: _npz(p), _npz_then_interrupt),
}


@pytest.mark.parametrize("kind", list(WRITES))
def test_an_interrupted_write_keeps_the_earlier_file_and_leaves_no_temporary(tmp_path, kind):
    name, write_good, write_interrupted = WRITES[kind]
    target = tmp_path / name
    write_good(target)
    before = target.read_bytes()
    seen: list[list[str]] = []
    with pytest.raises(KeyboardInterrupt):
        write_interrupted(target, lambda: _interrupt(tmp_path, seen))
    assert seen == [sorted([name, f".{name}.tmp{os.getpid()}"])]  # it was stopped mid-write, its temporary open
    assert os.listdir(tmp_path) == [name]
    assert target.read_bytes() == before


def test_a_file_where_the_folder_should_be_is_a_clear_error_and_nothing_is_written(tmp_path):
    (tmp_path / "taken").write_text("keep me\n")
    with pytest.raises(ConfigError, match=r"cannot make the output folder .*taken/out: .*taken is a file; give"):
        write_text_atomic(tmp_path / "taken" / "out" / "report.md", "# report\n")
    with pytest.raises(ConfigError, match=r"output folder .*taken/gap: .*taken is a file; give a folder"):
        save_report(_gap_report("impliret/unispeaker/wknow"), tmp_path / "taken" / "gap")
    with pytest.raises(ConfigError, match=r"output folder .*taken: it is a file; give a folder"):
        output_folder(tmp_path / "taken")
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match=r"output folder .*gone/out: .*gone is a link to nothing; give a folder"):
        write_text_atomic(tmp_path / "gone" / "out" / "report.md", "# report\n")
    assert sorted(os.listdir(tmp_path)) == ["gone", "taken"] and (tmp_path / "taken").read_text() == "keep me\n"


# ---------------------------------------------------------------- what a killed process left

KILLED_WRITER = """
import sys, time
from gapbench.files import atomic_writer
with atomic_writer(sys.argv[1]) as fh:
    fh.write('{"run": 1}')
with atomic_writer(sys.argv[1]) as fh:
    fh.write('{"run": 2, "half')
    fh.flush()
    print("writing", flush=True)
    time.sleep(120)
"""


def _gap_report(task: str) -> GapReport:
    rows = [{"pool_size": n, "verifier_standard": 0.3 + n / 1000, "verifier_gold_infused": 0.5 + n / 1000,
             "pool_recall": 0.9, "retrievers": {"bm25": 0.2}, "retrievers_gold_infused": {"bm25": 0.25}}
            for n in (10, 100)]
    return GapReport(task=task, measure="nDCG@10", retrievers={"bm25": 0.2},
                     best_retriever={"name": "bm25", "value": 0.2}, verifier_standard={"value": 0.4}, verifier_gold_infused={"value": 0.6}, gap=0.6 - 0.2,
                     gap_standard=0.4 - 0.2, pool_recall=0.9, pool_depth=100, n_queries=4, llm_calls=8,
                     verifier_answers=None, pool_scaling=rows, other_qrels={}, meta={"seed": 0, "retrievers": ["bm25"]})


def test_a_killed_writers_temporary_is_swept_by_the_next_save_and_a_live_ones_is_kept(tmp_path):
    out = tmp_path / "gap-out"
    out.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(out / "gap.json")], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "writing"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    stale = out / f".gap.json.tmp{proc.pid}"
    assert stale.read_text() == '{"run": 2, "half'  # SIGKILL leaves no chance to clean up
    assert (out / "gap.json").read_text() == '{"run": 1}'  # the finished file is untouched
    live = out / f".pool_scaling.png.tmp{os.getppid()}"  # the process that started pytest still runs
    live.write_bytes(b"\x89PNG half")

    report = _gap_report("impliret/multispeaker/wknow")
    paths = save_report(report, out)
    assert sorted(os.listdir(out)) == sorted(["gap.json", "pool_scaling.png", live.name])
    assert json.loads(paths["json"].read_text()) == report.model_dump(mode="json")
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert live.read_bytes() == b"\x89PNG half"


# ---------------------------------------------------------------- the embedding cache

ENCODER = """
def encode(batch):
    return np.array([[len(t), sum(map(ord, t)) % 997, float(t.split()[-1])] for t in batch], dtype=np.float32)
"""
TEXTS = [f"text number {i}" for i in range(50)]  # chunks of 8: seven, the last of two texts

KILLED_ENCODING = """
import io, sys, time
import numpy as np
from gapbench.cache import EmbeddingCache
""" + ENCODER + """
class StalledOnTheFourthChunk(EmbeddingCache):
    written = 0

    def _write(self, fh, chunk):
        self.written += 1
        if self.written < 4:
            return super()._write(fh, chunk)
        buf = io.BytesIO()
        np.save(buf, chunk)
        fh.write(buf.getvalue()[:60])
        fh.flush()
        print("writing", flush=True)
        time.sleep(120)

StalledOnTheFourthChunk("fp-test", [f"text number {i}" for i in range(50)], chunk_size=8).get(encode)
"""

DONE_ENCODING = """
import sys
from gapbench.cache import EmbeddingCache

def encode(batch):
    sys.exit(3)  # every chunk is cached: the encoder must not be asked

EmbeddingCache("fp-test", [f"text number {i}" for i in range(50)], chunk_size=8).get(encode)
"""


def _encode(batch):
    namespace = {"np": np}
    exec(ENCODER, namespace)
    return namespace["encode"](batch)


def test_the_cache_sweeps_a_killed_chunk_and_re_encodes_only_the_missing_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    proc = subprocess.Popen([sys.executable, "-c", KILLED_ENCODING], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()

    cache = EmbeddingCache("fp-test", TEXTS, chunk_size=8)
    stale = cache.dir / f".chunk-00003.npy.tmp{proc.pid}"
    assert stale.stat().st_size == 60
    finished = {p.name: p.stat().st_mtime_ns for p in cache.dir.glob("chunk-*.npy")}
    assert sorted(finished) == ["chunk-00000.npy", "chunk-00001.npy", "chunk-00002.npy"]
    assert cache.missing_chunks() == [3, 4, 5, 6]
    live = cache.dir / f".chunk-00005.npy.tmp{os.getppid()}"  # another encoding of the same texts under way
    live.write_bytes(b"half")

    batches: list[list[str]] = []
    got = cache.get(lambda batch: batches.append(batch) or _encode(batch))
    assert batches == [TEXTS[24:32], TEXTS[32:40], TEXTS[40:48], TEXTS[48:50]]
    assert {n: (cache.dir / n).stat().st_mtime_ns for n in finished} == finished
    assert sorted(os.listdir(cache.dir)) == sorted(
        ["meta.json", live.name, *(f"chunk-{i:05d}.npy" for i in range(7))])
    np.testing.assert_array_equal(got, _encode(TEXTS))
    assert got[24].tolist() == [len("text number 24"), sum(map(ord, "text number 24")) % 997, 24.0]

    # a dead writer's temporary beside a complete cache: the next process sweeps it without encoding anything
    dead = cache.dir / f".chunk-00006.npy.tmp{_dead_pid()}"
    dead.write_bytes(b"half")
    done = subprocess.run([sys.executable, "-c", DONE_ENCODING], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert not dead.exists() and live.exists()
    assert {n: (cache.dir / n).stat().st_mtime_ns for n in finished} == finished


@pytest.mark.model
def test_a_killed_colbert_index_build_is_swept_by_the_next_build(tmp_path, monkeypatch):
    import pylate  # noqa: F401  (CI installs the colbert extra; see tests/test_colbert.py)

    from gapbench.adapters.colbert import ColBERT

    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    corpus = Corpus([Document("a", "The cat sat on the mat."), Document("b", "Stock markets fell sharply."),
                     Document("c", "A kitten rests on a rug.")])
    ann = ColBERT(index="voyager", k_token=64)
    ann._backend = ann._choose_backend(len(corpus))
    final = ann._index_dir(corpus.fingerprint)
    final.parent.mkdir(parents=True)
    killed = final.with_name(f".{final.name}.tmp{_dead_pid()}")  # pylate writes a folder
    killed.mkdir()
    (killed / "colbert.voyager").write_bytes(b"half an index")
    live = final.with_name(f".{final.name}.tmp{os.getppid()}")
    live.mkdir()

    ann.index(corpus)
    assert ann._backend == "voyager"
    assert sorted(os.listdir(final.parent)) == sorted([final.name, live.name])
    assert json.loads((final / "COMPLETE").read_text()) == {"n_docs": 3, "backend": "voyager"}
    assert [d for d, _ in ann.search(Queries([Query("q", "where is the cat sitting")]), 3)["q"]][:1] in (["a"], ["c"])


# ---------------------------------------------------------------- the same bytes as before

def test_outputs_keep_their_bytes(tmp_path):
    # gzip with mtime 0: the same text gives the same bytes at any time
    write_text_atomic(tmp_path / "a.tsv.gz", "q1\tQ0\td1\t1\t2.5\trun\n")
    raw = (tmp_path / "a.tsv.gz").read_bytes()
    assert raw[4:8] == b"\0\0\0\0" and gzip.decompress(raw) == b"q1\tQ0\td1\t1\t2.5\trun\n"
    assert write_bytes_atomic(tmp_path / "b.bin", "é\n".encode()).read_bytes() == b"\xc3\xa9\n"
    # a PNG through the writer is the PNG matplotlib writes to a path itself
    fig = _figure()
    fig.savefig(tmp_path / "direct.png")
    assert save_figure_atomic(fig, tmp_path / "atomic.png").read_bytes() == (tmp_path / "direct.png").read_bytes()
    # gap.json keeps its layout: two-space indent, no trailing newline
    report = _gap_report("impliret/unispeaker/wknow")
    path = save_report(report, tmp_path / "gap")["json"]
    assert path.read_text() == json.dumps(report.model_dump(mode="json"), indent=2)


def test_xgboost_probe_weights_are_the_bytes_xgboost_saves(tmp_path):
    pytest.importorskip("xgboost")
    from gapbench.analyses.argus.probe import training as ap

    rng = np.random.default_rng(0)
    x = rng.standard_normal((120, 8))
    y = np.clip(0.5 + 0.1 * x[:, 0], 0, 1)
    grid = {"xgboost": {"n_estimators": [20], "max_depth": [2], "learning_rate": [0.1], "subsample": [1.0],
                        "colsample_bytree": [1.0], "min_child_weight": [1], "reg_lambda": [1.0]}}
    probe, _ = ap.train_probe(x, y, "fp-x", seed=0, families=["xgboost"], grids=grid)
    d = probe.save(tmp_path / "probe")
    probe.fitted.booster.save_model(str(tmp_path / "reference.json"))
    assert (d / "xgb.json").read_bytes() == (tmp_path / "reference.json").read_bytes()
    assert sorted(os.listdir(d)) == ["probe.json", "xgb.json"]


# ---------------------------------------------------------------- a BEIR download that fails its checksum

def test_a_download_with_the_wrong_checksum_leaves_nothing_in_the_cache(tmp_path, monkeypatch):
    from gapbench.tasks import beir

    served = tmp_path / "served"
    served.mkdir()
    (served / "scifact.zip").write_bytes(os.urandom(3 << 20))  # several blocks are written before the check

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(served), **kwargs)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
        monkeypatch.setattr(beir, "ZIP_URL", f"http://127.0.0.1:{server.server_address[1]}/{{name}}.zip")
        with pytest.raises(DatasetUnavailableError, match="md5 .* but BEIR publishes 5f7d1de60b170fc8027bb7898e2efca1"):
            beir.download_zip("scifact")
    finally:
        server.shutdown()
        server.server_close()
    assert os.listdir(tmp_path / "home" / "cache" / "datasets" / "beir") == []
