"""BEIR: fingerprints of the fixture sets, ignore_identical_ids as a mask, the official zip path and offline failures."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import http.server
import shutil
import threading
import zipfile
from pathlib import Path

import pytest

import gapbench.tasks.beir as beir
from gapbench.errors import ConfigError, DataFormatError, DatasetUnavailableError
from gapbench.runner import run
from gapbench.task import get_task

FIXTURES = Path(__file__).parent / "fixtures" / "beir"


@pytest.fixture(autouse=True)
def _no_env_copy(monkeypatch):
    monkeypatch.delenv(beir.ENV_VAR, raising=False)


def test_scifact_fingerprint():
    data = get_task(f"beir/scifact:data_dir={FIXTURES}").load()
    assert len(data.corpus) == 6 and len(data.queries) == 4 and len(data.qrels) == 4
    assert sum(len(d) for d in data.qrels.values()) == 5
    first, last = data.corpus["4983"], data.corpus[data.corpus.ids()[-1]]
    assert data.corpus.ids()[0] == "4983"
    assert first.title == "Diffusion tensor imaging of white matter maturation in preterm newborns."
    assert first.text.startswith("Water diffusion anisotropy in cerebral white matter")
    assert last.doc_id == "43385013" and last.title.startswith("Gut microbiota composition")
    # query "0" is judged only in train.tsv, so the test split starts at "1"
    assert data.queries.ids() == ["1", "3", "5", "13"]
    assert data.queries["13"].text == "Statin-associated muscle pain is largely a nocebo effect."
    assert dict(data.qrels["13"]) == {"31715818": 1, "43385013": 0}  # grade 0 kept as a judgement
    assert data.excluded == {}  # no query id is a document id in SciFact
    assert data.corpus.fingerprint.startswith("6035728ed2ef")


def test_train_split_and_direct_folder(monkeypatch):
    data = get_task(f"beir/scifact:data_dir={FIXTURES / 'scifact'},split=train").load()
    assert data.queries.ids() == ["0"] and dict(data.qrels["0"]) == {"5836": 1}
    monkeypatch.setenv(beir.ENV_VAR, str(FIXTURES))
    task = get_task("beir/scifact")
    assert task.revision == "local" and len(task.load().queries) == 4


def test_a_local_copys_qrels_link_out_of_its_folder_is_refused(tmp_path):
    # the same confinement as `gapbench run DIR`: judgements are read from the copy, never through a link out of it
    outside = tmp_path / "elsewhere.tsv"
    outside.write_text("query-id\tcorpus-id\tscore\n1\t4983\t1\n")
    copy = tmp_path / "copy" / "scifact"
    shutil.copytree(FIXTURES / "scifact", copy)
    (copy / "qrels" / "test.tsv").unlink()
    (copy / "qrels" / "test.tsv").symlink_to(outside)
    with pytest.raises(ConfigError, match=r"qrels of split=test.*leads outside its folder"):
        get_task(f"beir/scifact:data_dir={tmp_path / 'copy'}").load()


def test_a_local_copy_whose_folder_name_holds_an_option_is_re_made_from_that_folder(tmp_path):
    # the task's spec (what re-scoring makes the task from) quotes the folder: ",split=train" stays part of its name
    odd = tmp_path / "scifact,split=train"
    shutil.copytree(FIXTURES, odd)
    task = get_task(f'beir/scifact:data_dir="{odd}"')
    assert task.split == "test" and task.spec == f'beir/scifact:data_dir="{odd}",split=test'
    again = get_task(task.spec)
    assert again.split == "test" and again.load().queries.ids() == task.load().queries.ids()
    assert len(again.load().queries) == 4  # the test split, not train's one query


def test_a_folders_queries_that_no_split_judges_are_counted_not_silently_dropped(tmp_path):
    # the fixture's 5 queries: 4 judged in test.tsv, query 0 in train.tsv only, so the test split leaves none out
    assert get_task(f"beir/scifact:data_dir={FIXTURES}").load().unjudged == 0
    copy = tmp_path / "scifact"
    shutil.copytree(FIXTURES / "scifact", copy)
    (copy / "qrels" / "train.tsv").unlink()  # now query 0 is judged nowhere: left out as trec_eval does, and counted
    task = get_task(f"beir/scifact:data_dir={tmp_path}")
    data = task.load()
    assert (len(data.queries), data.unjudged) == (4, 1) and "0" not in data.queries
    res = run(task, "bm25", k=10)
    assert (res.n_queries, res.n_unjudged) == (4, 1)
    assert str(res).splitlines()[0].endswith(": 5 queries, 1 without judgements (not scored, as trec_eval)")


def test_qrels_without_header(tmp_path):
    copy = tmp_path / "scifact"
    shutil.copytree(FIXTURES / "scifact", copy)
    lines = (copy / "qrels" / "test.tsv").read_text().splitlines()
    (copy / "qrels" / "test.tsv").write_text("\n".join(lines[1:]) + "\n")
    with_header = get_task(f"beir/scifact:data_dir={FIXTURES}").load().qrels
    without = get_task(f"beir/scifact:data_dir={tmp_path}").load().qrels
    assert without.to_dict() == with_header.to_dict()


def test_ignore_identical_ids_masks_before_the_cut():
    task = get_task(f"beir/arguana:data_dir={FIXTURES}")
    data = task.load()
    assert data.excluded == {q: frozenset({q}) for q in data.queries}
    result = run(task, "bm25", k=3, measures=["nDCG@10"])
    assert set(result.run) == set(data.queries)
    for qid, ranking in result.run.items():
        ids = [d for d, _ in ranking]
        assert qid not in ids and len(ids) == 3
    # without the mask the query's own text is the best match: the option is what removes it
    plain = run(get_task(f"beir/arguana:data_dir={FIXTURES},ignore_identical_ids=false"), "bm25", k=3)
    assert all(plain.run[q][0][0] == q for q in data.queries)


def test_registry_and_metadata():
    from gapbench.task import TASKS

    names = {n for n in TASKS.names() if n.startswith("beir/")}
    assert len(names) == 14 + 12  # 14 sets plus the 12 CQADupStack forums
    assert {"beir/msmarco", "beir/webis-touche2020", "beir/dbpedia-entity", "beir/cqadupstack/android"} <= names
    task = get_task("beir/msmarco")
    assert task.split == "dev" and task.n_docs == 8841823 and task.n_queries == 6980
    sf = get_task("beir/scifact")
    assert sf.revision == "md5:5f7d1de60b170fc8027bb7898e2efca1"
    assert sf.source == "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/scifact.zip"
    assert "Thakur" in sf.citation and sf.license and sf.n_docs == 5183 and sf.n_queries == 300
    assert sum(beir.DATASETS[f"cqadupstack/{f}"].n_queries for f in beir.CQADUPSTACK_FORUMS) == 13145
    assert get_task("beir/cqadupstack/tex").source.endswith("/cqadupstack.zip")
    with pytest.raises(ConfigError, match="no split 'dev'.*test"):
        get_task("beir/arguana:split=dev")
    with pytest.raises(ConfigError, match="source=zip"):
        get_task("beir/scifact:source=ftp")
    with pytest.raises(ConfigError, match="CQADupStack"):
        get_task("beir/cqadupstack/gis:source=hf").load()


def test_missing_local_copy_names_the_layout(tmp_path):
    with pytest.raises(DataFormatError, match=r"scifact/corpus.jsonl.*scifact.zip"):
        get_task(f"beir/scifact:data_dir={tmp_path}").load()


# ---------------------------------------------------------------- official zip, offline and through a local server


def test_zip_download_fails_fast_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path))
    monkeypatch.setattr(beir, "ZIP_URL", "http://127.0.0.1:9/{name}.zip")  # nothing listens on port 9
    with pytest.raises(DatasetUnavailableError, match=r"127.0.0.1:9/scifact.zip.*data_dir=DIR.*GAPBENCH_DATA_BEIR"):
        get_task("beir/scifact").load()
    assert not list((tmp_path / "cache" / "datasets" / "beir").glob("*.part*"))  # no partial file left


def test_hf_source_fails_fast_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    task = get_task("beir/scifact:source=hf")
    assert task.source == "hf:BeIR/scifact"
    with pytest.raises(DatasetUnavailableError, match=r"BeIR/scifact.*GAPBENCH_DATA_BEIR"):
        task.load()


def _zip_of(folder: Path, archive: str, dest: Path, extra: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(dest, "w") as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, f"{archive}/{path.relative_to(folder)}")
        for name, text in (extra or {}).items():
            zf.writestr(name, text)
    return dest


@pytest.fixture
def zip_server(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(served), **kwargs)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield served, f"http://127.0.0.1:{server.server_address[1]}/{{name}}.zip"
    server.shutdown()
    server.server_close()


def test_zip_download_check_and_extract(monkeypatch, tmp_path, zip_server):
    served, url = zip_server
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(beir, "ZIP_URL", url)
    archive = _zip_of(FIXTURES / "scifact", "scifact", served / "scifact.zip")
    md5 = hashlib.md5(archive.read_bytes()).hexdigest()
    monkeypatch.setitem(beir.DATASETS, "scifact", dataclasses.replace(beir.DATASETS["scifact"], md5=md5))
    data = get_task("beir/scifact").load()
    assert len(data.corpus) == 6 and data.queries.ids() == ["1", "3", "5", "13"]
    extracted = tmp_path / "home" / "cache" / "datasets" / "beir" / "scifact"
    assert (extracted / "qrels" / "test.tsv").exists()
    # the second load reads the checked copy in the cache: the server may be gone
    archive.unlink()
    assert get_task("beir/scifact").load().corpus.fingerprint == data.corpus.fingerprint


def test_zip_with_wrong_checksum_is_refused(monkeypatch, tmp_path, zip_server):
    served, url = zip_server
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(beir, "ZIP_URL", url)
    _zip_of(FIXTURES / "scifact", "scifact", served / "scifact.zip")  # not the archive BEIR published
    with pytest.raises(DatasetUnavailableError, match="md5 .* BEIR publishes 5f7d1de60b170fc8027bb7898e2efca1"):
        get_task("beir/scifact").load()
    assert not (tmp_path / "home" / "cache" / "datasets" / "beir" / "scifact.zip").exists()


def test_zip_member_outside_the_set_is_refused(monkeypatch, tmp_path, zip_server):
    served, url = zip_server
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(beir, "ZIP_URL", url)
    archive = _zip_of(FIXTURES / "arguana", "arguana", served / "arguana.zip", {"../escape.txt": "x"})
    md5 = hashlib.md5(archive.read_bytes()).hexdigest()
    monkeypatch.setitem(beir.DATASETS, "arguana", dataclasses.replace(beir.DATASETS["arguana"], md5=md5))
    with pytest.raises(DataFormatError, match="unexpected member '../escape.txt'"):
        get_task("beir/arguana").load()
    assert not (tmp_path / "home" / "cache" / "datasets" / "escape.txt").exists()


@pytest.mark.parametrize("form", ["bom", "crlf", "gzip"])
def test_local_copy_in_other_encodings_loads_the_same(tmp_path, form):
    # the same set with a BOM on every file, CRLF line ends, or gzipped files loads to identical fingerprints
    copy = Path(shutil.copytree(FIXTURES / "scifact", tmp_path / "scifact"))
    for path in [p for p in copy.rglob("*") if p.is_file()]:
        raw = path.read_bytes()
        if form == "bom":
            path.write_bytes(b"\xef\xbb\xbf" + raw)
        elif form == "crlf":
            path.write_bytes(raw.replace(b"\n", b"\r\n"))
        else:
            path.with_name(path.name + ".gz").write_bytes(gzip.compress(raw))
            path.unlink()
    if form == "gzip":  # BEIR's layout names plain files; gapbench takes corpus.jsonl.gz and qrels/<split>.tsv.gz too
        assert (copy / "corpus.jsonl.gz").exists()
    want = get_task(f"beir/scifact:data_dir={FIXTURES}").load()
    got = get_task(f"beir/scifact:data_dir={tmp_path}").load()
    assert got.corpus.fingerprint == want.corpus.fingerprint and got.corpus.fingerprint.startswith("6035728ed2ef")
    assert got.queries.fingerprint == want.queries.fingerprint and got.queries.ids() == ["1", "3", "5", "13"]
    assert got.qrels.to_dict() == want.qrels.to_dict() == {
        "1": {"4983": 1}, "3": {"7912": 1}, "5": {"18670": 1}, "13": {"31715818": 1, "43385013": 0}}


def test_integer_ids_in_a_local_copy_are_refused_with_the_fix(tmp_path):
    # BEIR's loader would keep 4983 as a number that never matches the string "4983" of its qrels
    copy = Path(shutil.copytree(FIXTURES / "scifact", tmp_path / "scifact"))
    corpus = copy / "corpus.jsonl"
    corpus.write_text(corpus.read_text().replace('"_id": "4983"', '"_id": 4983'))
    with pytest.raises(DataFormatError) as err:
        get_task(f"beir/scifact:data_dir={tmp_path}").load()
    assert str(err.value) == (f"{corpus}, line 1: field '_id' is the number 4983; document ids are JSON strings, for "
                              'example "_id": "4983".')


@pytest.mark.parametrize("name", ["scifact", "arguana"])
def test_local_copy_memory_mapped_gives_the_same_task_and_run(name, monkeypatch):
    from gapbench.corpus_store import ENV_VAR, CompactCorpus

    loaded = {}
    for mode in ("never", "always"):
        monkeypatch.setenv(ENV_VAR, mode)
        task = get_task(f"beir/{name}:data_dir={FIXTURES}")
        data = task.load()
        assert isinstance(data.corpus, CompactCorpus) == (mode == "always")
        loaded[mode] = (data, run(task, "bm25", k=3, measures=["nDCG@10", "R@100"]))
    (plain, plain_result), (compact, compact_result) = loaded["never"], loaded["always"]
    assert compact.corpus.fingerprint == plain.corpus.fingerprint
    assert list(compact.corpus.values()) == list(plain.corpus.values())
    assert compact.excluded == plain.excluded  # ArguAna's self-matches, found through the mapped ids
    assert compact_result.run.to_dict() == plain_result.run.to_dict()
    assert compact_result.means == plain_result.means
