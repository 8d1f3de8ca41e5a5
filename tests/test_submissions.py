"""Leaderboard submissions: a real bm25 submission on ImpliRet validates and scores to the published number; each kind
of malformed submission is reported with its own message (file, line or id, and the fix)."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from pathlib import Path

import pytest

import gapbench
from gapbench.cli import main
from gapbench.errors import SubmissionError
from gapbench.products.submissions.files import Refused, inside, sha256_file
from gapbench.products.submissions.validate import load_scores, validate_submission
from gapbench.products.submissions.write import score_submission, write_submission

TASK = "impliret/unispeaker/wknow"
RUN = "runs/impliret__unispeaker__wknow.trec.gz"


@pytest.fixture(scope="module")
def valid(once_per_session) -> Path:
    """A valid submission of bm25 on TASK (k=20), made once in the whole session; tests copy it (``sub``)."""

    def make(folder: Path) -> None:
        result = gapbench.run(TASK, "bm25", k=20)
        write_submission(folder / "bm25", system="bm25", description="bm25s defaults.", suite="impliret",
                         runs={TASK: result.run}, adapter={"name": "bm25", "config": {"k1": 1.5, "b": 0.75}},
                         contact="ci@example.org", k=20)

    return once_per_session("submission-bm25", make) / "bm25"


@pytest.fixture()
def sub(valid, tmp_path) -> Path:
    d = tmp_path / "s"
    shutil.copytree(valid, d)
    return d


def _meta(d: Path) -> dict:
    return json.loads((d / "submission.json").read_text())


def _set_meta(d: Path, meta: dict) -> None:
    (d / "submission.json").write_text(json.dumps(meta, indent=2))


def _lines(d: Path, rel: str = RUN) -> list[str]:
    with gzip.open(d / rel, "rt") as fh:
        return fh.read().splitlines()


def _write_run(d: Path, lines: list[str], rel: str = RUN, task: str = TASK) -> None:
    """Replace a run and fix its hash in submission.json, so only the planted problem remains."""
    with gzip.open(d / rel, "wt") as fh:
        fh.write("\n".join(lines) + "\n")
    meta = _meta(d)
    meta["tasks"][task]["sha256"] = sha256_file(d / rel)
    _set_meta(d, meta)


def _errors(d: Path, **kw) -> list[str]:
    return [str(p) for p in validate_submission(d, **kw).errors]


def _one(d: Path, needle: str, **kw) -> str:
    errs = _errors(d, **kw)
    hits = [e for e in errs if needle in e]
    assert hits, f"{needle!r} not in {errs}"
    return hits[0]


# ---------------------------------------------------------------- the valid submission

def test_valid_submission_validates_and_scores(sub, capsys):
    report = validate_submission(sub)
    assert report.ok and list(report.runs) == [TASK]
    # 1 of 6 suite tasks: a warning, not an error.
    assert any("covers 1 of 6 tasks of suite 'impliret'" in str(w) for w in report.warnings)
    assert main(["submit", "validate", str(sub)]) == 0
    assert main(["submit", "score", str(sub)]) == 0
    scores = json.loads((sub / "scores.json").read_text())
    t = scores["tasks"][TASK]
    # The ImpliRet authors' published BM25 nDCG@10 on unispeaker/wknow is 14.18; gapbench's bm25 gives 0.1416.
    assert t["measures"]["nDCG@10"] == pytest.approx(0.1416, abs=5e-5)
    assert len(t["per_query"]["nDCG@10"]) == 1500 and t["n_queries"] == 1500
    assert sum(t["per_query"]["nDCG@10"].values()) / 1500 == pytest.approx(t["measures"]["nDCG@10"], abs=1e-12)
    assert t["ci95"]["nDCG@10"][0] < t["measures"]["nDCG@10"] < t["ci95"]["nDCG@10"][1]
    task = gapbench.get_task(TASK)
    assert t["revision"] == task.revision and t["fingerprints"]["corpus"] == task.load().corpus.fingerprint
    assert scores["manifest"]["inputs"] == {"submission.json": sha256_file(sub / "submission.json"), RUN: sha256_file(sub / RUN)}
    assert scores["kind"] == "submission_scores" and scores["version"] == 1 and "full_benchmark_avg" not in scores
    assert load_scores(sub)["system"] == "bm25"
    # A run changed after scoring is caught.
    _write_run(sub, _lines(sub)[:-1])
    with pytest.raises(SubmissionError, match="changed since it was scored"):
        load_scores(sub)


def test_cli_prints_every_problem_and_exits_2(sub, capsys):
    meta = _meta(sub)
    meta["sytem"] = meta.pop("system")
    meta["k"] = "20"
    _set_meta(sub, meta)
    (sub / "runs" / "x.py").write_text("print(1)\n")
    assert main(["submit", "validate", str(sub)]) == 2
    # unlike every other command's one-line error (tests/hostile), a submission's problems are printed one per line:
    # a line with the counts, then each file's path and its errors, indented
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == f"gapbench: error: invalid submission {sub}: 4 errors in 2 files (exit 2)"
    assert lines[1] == f"{sub / 'runs' / 'x.py'}:"
    assert lines[2].startswith("  not allowed: a submission is data only")
    assert lines[3] == f"{sub / 'submission.json'}:"
    assert lines[4].startswith("  unknown field 'sytem'. Did you mean 'system'?")
    assert lines[5].startswith("  missing field 'system'")
    assert lines[6] == "  field 'k' is a string ('20'); expected integer: documents per query in the runs."
    assert len(lines) == 7


def test_score_refuses_an_invalid_submission(sub):
    (sub / "run.sh").write_text("rm -rf /\n")
    with pytest.raises(SubmissionError, match=r"run\.sh: not allowed"):
        score_submission(sub)
    assert not (sub / "scores.json").exists()


def test_an_unscored_or_unread_submission_is_refused_by_name(sub, tmp_path):
    """What scoring, boards and exports read of a report (submission.json, the recomputed scores) is refused, naming
    the folder and the command that fixes it, when validation could not give it."""
    report = validate_submission(sub)
    assert report.ok and report.submission()["system"] == "bm25"
    with pytest.raises(SubmissionError, match=re.escape(f"{sub}: not scored yet (no scores.json); run "
                                                        f"`gapbench submit score {sub}`.")):
        report.scored()
    (sub / "submission.json").unlink()
    unread = validate_submission(sub)
    assert unread.meta is None and not unread.ok
    with pytest.raises(SubmissionError, match=re.escape(f"{sub}: submission.json could not be read as a JSON "
                                                        f"object; fix the errors `gapbench submit validate {sub}`")):
        unread.submission()


# ---------------------------------------------------------------- schema

def test_unknown_field_with_suggestion(sub):
    meta = _meta(sub)
    meta["descripton"] = "typo"
    _set_meta(sub, meta)
    assert "unknown field 'descripton'. Did you mean 'description'?" in _one(sub, "descripton")


def test_missing_field(sub):
    meta = _meta(sub)
    del meta["contact"]
    _set_meta(sub, meta)
    assert _one(sub, "contact") == ("error: submission.json: missing field 'contact': give a name with an e-mail address "
                                    "or a URL, on one line (at most 200 characters).")


def test_wrong_type(sub):
    meta = _meta(sub)
    meta["models"] = "bm25"
    _set_meta(sub, meta)
    assert "field 'models' is a string ('bm25'); expected list" in _one(sub, "'models'")


def test_malformed_json_names_the_line(sub):
    (sub / "submission.json").write_text('{\n  "system": "x",\n  "suite": \n}\n')
    msg = _one(sub, "malformed JSON")
    assert msg.startswith("error: submission.json, line 4: malformed JSON (Expecting value")


def test_model_entry_fields(sub):
    meta = _meta(sub)
    meta["models"] = [{"name": "org/model"}]
    _set_meta(sub, meta)
    assert "models[0].revision is missing" in _one(sub, "models[0]")


# ---------------------------------------------------------------- tasks

def test_unknown_task_with_suggestion(sub):
    meta = _meta(sub)
    meta["tasks"]["impliret/unispeaker/wknw"] = meta["tasks"].pop(TASK)
    _set_meta(sub, meta)
    msg = _one(sub, "unknown task")
    assert "unknown task 'impliret/unispeaker/wknw'. Did you mean 'impliret/unispeaker/wknow'" in msg


def test_task_outside_the_suite(sub):
    task = "rarb-mcr/ARC-Challenge"
    data = gapbench.get_task(task).load()
    q = next(iter(data.queries))
    rel = "runs/rarb-mcr__ARC-Challenge.trec"
    (sub / rel).write_text(f"{q} Q0 {q}-0 1 2.0 x\n{q} Q0 {q}-1 2 1.0 x\n")
    meta = _meta(sub)
    meta["tasks"][task] = {"revision": gapbench.get_task(task).revision, "run": rel, "sha256": sha256_file(sub / rel)}
    _set_meta(sub, meta)
    assert "task 'rarb-mcr/ARC-Challenge' is not part of suite 'impliret'" in _one(sub, "not part of suite")


def test_unknown_suite(sub):
    meta = _meta(sub)
    meta["suite"] = "implirett"
    _set_meta(sub, meta)
    assert "unknown suite 'implirett'. Did you mean 'impliret'?" in _one(sub, "suite")


def test_revision_mismatch(sub):
    meta = _meta(sub)
    meta["tasks"][TASK]["revision"] = "github:ZeinabTaghavi/ImpliRet@0000000"
    _set_meta(sub, meta)
    assert "differs from the registered task's 'github:ZeinabTaghavi/ImpliRet@ddd14afc" in _one(sub, "revision")


def test_hash_mismatch(sub):
    meta = _meta(sub)
    meta["tasks"][TASK]["sha256"] = "0" * 64
    _set_meta(sub, meta)
    msg = _one(sub, "sha256 mismatch")
    assert f"the file hashes to {sha256_file(sub / RUN)}; update submission.json" in msg


def test_unlisted_run_file(sub):
    shutil.copy(sub / RUN, sub / "runs" / "impliret__unispeaker__temporal.trec.gz")
    assert _one(sub, "temporal") == ("error: runs/impliret__unispeaker__temporal.trec.gz: is not listed in submission.json "
                                     "'tasks'; list it (with its sha256) or remove it.")


def test_missing_run_file(sub):
    (sub / RUN).unlink()
    assert f"run file {RUN} does not exist" in _one(sub, "does not exist")


# ---------------------------------------------------------------- paths and files

def test_code_file_rejected(sub):
    (sub / "evil.py").write_text("import os\n")
    assert _one(sub, "evil.py").startswith("error: evil.py: not allowed: a submission is data only")


def test_unexpected_folder_rejected(sub):
    (sub / "src").mkdir()
    (sub / "src" / "a.trec").write_text("")
    assert "src/: unexpected folder" in _one(sub, "src/")


def test_symlink_rejected(sub, tmp_path):
    target = tmp_path / "outside.trec"
    target.write_text("0 Q0 0 1 1.0 x\n")
    os.symlink(target, sub / "runs" / "link.trec")
    assert "runs/link.trec: is a symbolic link" in _one(sub, "symbolic link")


def test_executable_rejected(sub):
    os.chmod(sub / RUN, 0o755)
    assert f"{RUN}: is executable (mode 755)" in _one(sub, "executable")
    assert f"chmod a-x {RUN}" in _one(sub, "executable")


def test_absolute_path_rejected(sub):
    meta = _meta(sub)
    meta["tasks"][TASK]["run"] = str((sub / RUN).resolve())
    _set_meta(sub, meta)
    assert "is absolute; give a path relative to the submission" in _one(sub, "absolute")


def test_dotdot_path_rejected(sub):
    meta = _meta(sub)
    meta["tasks"][TASK]["run"] = "runs/../../elsewhere/impliret__unispeaker__wknow.trec.gz"
    _set_meta(sub, meta)
    assert "contains '..'; files must live inside the submission" in _one(sub, "'..'")


def test_wrong_run_name(sub):
    os.replace(sub / RUN, sub / "runs" / "wknow.trec.gz")
    meta = _meta(sub)
    meta["tasks"][TASK]["run"] = "runs/wknow.trec.gz"
    _set_meta(sub, meta)
    assert "should be runs/impliret__unispeaker__wknow.trec or .trec.gz; rename the file" in _one(sub, "rename")


def test_file_size_cap(sub):
    size = (sub / RUN).stat().st_size
    msg = _one(sub, "cap", max_run_bytes=1000)
    assert msg == f"error: {RUN}: is {size:,} bytes, over the 1,000-byte cap; gzip it and keep at most 1000 documents per query."


# ---------------------------------------------------------------- run content

def test_unknown_query_id(sub):
    lines = _lines(sub)
    lines.append("q-unknown Q0 5 1 3.0 bm25")
    _write_run(sub, lines)
    msg = _one(sub, "q-unknown")
    assert msg.startswith(f"error: {RUN}, line {len(lines)}: query id 'q-unknown' is not a query of task {TASK}")


def test_unknown_doc_id(sub):
    lines = _lines(sub)
    lines[4] = lines[4].split()[0] + " Q0 no-such-doc 99 0.5 bm25"
    _write_run(sub, lines)
    assert _one(sub, "no-such-doc").startswith(f"error: {RUN}, line 5: document id 'no-such-doc' (query '0') is not in "
                                                f"the corpus of task {TASK}")


def test_duplicate_document(sub):
    lines = _lines(sub)
    lines.insert(3, lines[0])
    _write_run(sub, lines)
    did = lines[0].split()[2]
    assert _one(sub, "twice") == (f"error: {RUN}, line 4: document {did!r} appears twice for query '0'; list each "
                                  "document once per query.")


def test_non_finite_score(sub):
    lines = _lines(sub)
    parts = lines[2].split()
    parts[4] = "1e999"
    lines[2] = " ".join(parts)
    _write_run(sub, lines)
    assert f"line 3: score 1e999 of document {parts[2]!r} for query '0' is not finite" in _one(sub, "finite")


@pytest.mark.parametrize("score", ["nan", "-inf", "Infinity", "3_0", "\u0663", "0x1p3"])
def test_scores_python_reads_but_trec_eval_does_not(sub, score):
    lines = _lines(sub)
    parts = lines[2].split()
    parts[4] = score
    lines[2] = " ".join(parts)
    _write_run(sub, lines)
    assert f"line 3: score {score!r} is not a decimal number" in _one(sub, "decimal")


def test_rank_with_underscore(sub):
    lines = _lines(sub)
    parts = lines[1].split()
    parts[3] = "1_0"
    lines[1] = " ".join(parts)
    _write_run(sub, lines)
    assert "line 2: rank '1_0' is not an integer" in _one(sub, "rank")


def test_byte_order_mark_in_a_run(sub):
    lines = _lines(sub)
    lines[0] = "\ufeff" + lines[0]
    _write_run(sub, lines)
    assert f"{RUN}, line 1: starts with a UTF-8 byte-order mark" in _one(sub, "byte-order")


def test_non_numeric_score_and_bad_columns(sub):
    lines = _lines(sub)
    p = lines[1].split()
    lines[1] = " ".join(p[:4] + ["high", p[5]])
    lines[2] = " ".join(lines[2].split()[:5])
    _write_run(sub, lines)
    assert "line 2: score 'high' is not a decimal number" in _one(sub, "'high'")
    assert "line 3: expected 6 columns 'query_id Q0 doc_id rank score tag', found 5" in _one(sub, "6 columns")


def test_all_scores_equal(sub):
    lines = [" ".join(l.split()[:4] + ["1.0", "bm25"]) for l in _lines(sub)]
    _write_run(sub, lines)
    assert "every score is 1.0; a run with all-equal scores is ranked by the tie rule" in _one(sub, "all-equal")


def test_more_than_1000_per_query(sub):
    corpus = gapbench.get_task(TASK).load().corpus.ids()
    lines = [f"0 Q0 {d} {i} {2000 - i}.0 bm25" for i, d in enumerate(corpus[:1001], 1)]
    _write_run(sub, lines)
    assert f"line 1001: query '0' has more than 1000 documents; keep the top 1000" in _one(sub, "more than 1000")


def test_problems_are_capped_per_file(sub):
    lines = _lines(sub)
    lines += [f"0 Q0 {i} 1 1.0" for i in range(30)]
    _write_run(sub, lines)
    errs = _errors(sub)
    assert len([e for e in errs if "expected 6 columns" in e]) == 20
    assert any("... and 10 more problems in this file" in e for e in errs)


def test_15000_unknown_ids_are_counted_not_each_looked_up(sub):
    """Each unknown id used to cost a fuzzy lookup over 1500 ids (15,000 lines: ~40 s); now the first three get a
    suggestion and the rest are counted."""
    lines = _lines(sub)
    lines += [f"q-{i} Q0 {i} 1 {i}.0 bm25" for i in range(15_000)]
    lines += [f"0 Q0 no-doc-{i} 1 {i}.0 bm25" for i in range(5)]
    _write_run(sub, lines)
    errs = _errors(sub)
    first = len(_lines(sub)) - 15_005 + 1
    assert [e for e in errs if "query id 'q-" in e] == [
        f"error: {RUN}, line {first + i}: query id 'q-{i}' is not a query of task {TASK}; use the task's query ids."
        for i in range(3)]
    assert (f"error: {RUN}: 15,000 lines in all name a query id that is not a query of task {TASK} (the first 3 are "
            "shown); use the task's query ids.") in errs
    assert len([e for e in errs if "document id 'no-doc-" in e]) == 3
    assert (f"error: {RUN}: 5 lines in all name a document id that is not in the corpus of task {TASK} (the first 3 "
            "are shown); rank only the task's documents.") in errs


def test_not_a_directory(tmp_path):
    assert _errors(tmp_path / "nope") == [f"error: {tmp_path / 'nope'}: is not a directory; a submission is a folder with "
                                          "submission.json and runs/."]


# ---------------------------------------------------------------- JSON read strictly

@pytest.mark.parametrize("text, needle", [
    ('\ufeff{"system": "x"}', "starts with a UTF-8 byte-order mark (BOM); save it as UTF-8 without BOM."),
    ('{"k": NaN}', "holds the literal NaN, which is not JSON; write a finite number."),
    ('{"k": -Infinity}', "holds the literal -Infinity, which is not JSON"),
    ('{"k": 1e400}', "holds the number 1e400, which overflows to infinity"),
    ('{"system": "a", "system": "b"}', "key 'system' appears twice in one object; keep one."),
    ('[' * 5000 + ']' * 5000, "is nested too deeply; at most 32 levels are accepted."),
    ('{"adapter": {"config": ' + '{"a": ' * 40 + '1' + '}' * 40 + '}}', "is nested more than 32 levels deep"),
    ('{"k": ' + '9' * 5000 + '}', "holds a value JSON readers refuse"),
    ('"just a string"', "must hold a JSON object, found string."),
])
def test_submission_json_read_strictly(sub, text, needle):
    (sub / "submission.json").write_text(text, encoding="utf-8")
    assert _errors(sub) == [f"error: submission.json: {needle}"] or needle in _one(sub, needle)


def test_submission_json_over_the_cap_is_not_parsed(sub):
    (sub / "submission.json").write_text('{"description": "' + "x" * 1_000_001 + '"}')
    assert _one(sub, "cap") == "error: submission.json: is 1,000,020 bytes, over the 1,000,000-byte cap; shorten it."


def test_submission_json_not_utf8(sub):
    (sub / "submission.json").write_bytes(b'{"system": "\xff"}')
    assert _one(sub, "UTF-8") == "error: submission.json, line 1: is not UTF-8 text (byte 12, 0xff); save it as UTF-8 JSON."


def test_boolean_format_version_and_float_k(sub):
    meta = _meta(sub)
    meta["format_version"], meta["k"] = True, 20.0
    _set_meta(sub, meta)
    assert "field 'format_version' is a boolean (True); expected integer" in _one(sub, "format_version")
    assert "field 'k' is a number (20.0); expected integer" in _one(sub, "'k'")


# ---------------------------------------------------------------- names at the door

@pytest.mark.parametrize("field, value, why", [
    ("system", "bm25 | 1.0 | 1.0 |", "has characters that are not accepted"),
    ("system", "bm25\n| 1 | **forged** |", "contains the control or invisible character U+000A"),
    ("system", "<b>bm25</b>", "has characters that are not accepted"),
    ("system", "-rf", "has characters that are not accepted"),
    ("system", "a" * 65, "is 65 characters long; at most 64 are accepted"),
    ("description", "fine text\n| 1 | **forged** | 0.99 |", "contains the control or invisible character U+000A"),
    ("description", "right-to-left \u202e override", "contains the control or invisible character U+202E"),
    ("description", "x" * 1001, "is 1,001 characters long; at most 1000 are accepted"),
    ("contact", "me@example.org\r\n", "contains the control or invisible character U+000D"),
    ("contact", " me@example.org", "has leading or trailing spaces"),
    ("url", "javascript:alert(1)", "has characters that are not accepted"),
    ("url", "https://example.org/<script>", "has characters that are not accepted"),
    ("date", "2024|01|01", "has characters that are not accepted"),
    ("gapbench_version", "0.1.0 <b>", "has characters that are not accepted"),
])
def test_free_text_fields_are_checked(sub, field, value, why):
    meta = _meta(sub)
    meta[field] = value
    _set_meta(sub, meta)
    msg = _one(sub, f"field {field!r} (")
    assert msg.startswith(f"error: submission.json: field {field!r} ({value!r:.60}) {why}; give ")


@pytest.mark.parametrize("name", ["..", "../x", "/abs", "a/../../b", "org/model/extra", "org\\model", "."])
def test_model_names_that_could_leave_a_folder(sub, name):
    meta = _meta(sub)
    meta["models"] = [{"name": name, "revision": "main"}]
    _set_meta(sub, meta)
    assert f"models[0].name ({name!r}) has characters that are not accepted" in _one(sub, "models[0].name")


@pytest.mark.parametrize("revision", ["..", "main/../../x", "/etc", "a b"])
def test_model_revisions_that_could_leave_a_folder(sub, revision):
    meta = _meta(sub)
    meta["models"] = [{"name": "org/model", "revision": revision}]
    _set_meta(sub, meta)
    assert f"models[0].revision ({revision!r}) has characters that are not accepted" in _one(sub, "models[0].revision")


def test_valid_names_pass(sub):
    meta = _meta(sub)
    meta.update(system="my_system+v2.1", url="https://example.org/a?b=1&c=%20#x", date="2025-02-03",
                models=[{"name": "org/model-x.v1", "revision": "pypi:pkg==1.0/sub"}], contact="Ann <ann@example.org>",
                description="Uses | pipes, <b>tags</b>, [links](x) and **stars**: all shown literally.")
    _set_meta(sub, meta)
    assert validate_submission(sub).ok


def test_write_submission_refuses_a_bad_system_name(tmp_path):
    with pytest.raises(gapbench.errors.ConfigError, match=r"system name 'a\|b' has characters that are not accepted"):
        write_submission(tmp_path / "x", system="a|b", description="d", suite="impliret", runs={}, adapter={},
                         contact="c")


# ---------------------------------------------------------------- paths stay inside the submission

def test_inside_refuses_every_escape(tmp_path):
    d = tmp_path / "sub"
    (d / "runs").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "x.trec").write_text("x")
    os.symlink(tmp_path / "outside", d / "linked")
    os.symlink(d / "runs", d / "alias")  # a link that stays inside is still a link
    (d / "runs" / "a.trec").write_text("x")
    assert inside(d, "runs/a.trec") == d / "runs" / "a.trec"
    for rel, why in [("/etc/passwd", "is absolute"), ("../outside/x.trec", "contains '..'"),
                     ("runs/../../outside/x.trec", "contains '..'"), ("linked/x.trec", "symbolic link linked"),
                     ("alias/a.trec", "symbolic link alias"), ("runs\\a.trec", "backslashes"), ("", "is empty"),
                     ("C:/x", "is absolute")]:
        with pytest.raises(Refused, match=re.escape(why)):
            inside(d, rel)


def test_runs_folder_linked_outside(sub, tmp_path):
    outside = tmp_path / "elsewhere"
    shutil.move(sub / "runs", outside)
    os.symlink(outside, sub / "runs")
    errs = _errors(sub)
    assert "error: runs: is a symbolic link; submissions may not contain links. Replace it with the file itself." in errs
    assert any("goes through the symbolic link runs" in e for e in errs)


def test_run_linked_to_a_file_inside(sub):
    os.replace(sub / RUN, sub / "data.bin")
    os.symlink(sub / "data.bin", sub / RUN)
    errs = _errors(sub)
    assert f"error: {RUN}: is a symbolic link; submissions may not contain links. Replace it with the file itself." in errs
    assert any(f"goes through the symbolic link {RUN}" in e for e in errs)


def test_gzip_bomb_stops_at_the_inflated_cap(sub):
    member = gzip.compress(b"0" * 10_000_000, compresslevel=9)
    (sub / RUN).write_bytes(member * 200)  # 2 GB of text in about 2 MB
    meta = _meta(sub)
    meta["tasks"][TASK]["sha256"] = sha256_file(sub / RUN)
    _set_meta(sub, meta)
    assert (sub / RUN).stat().st_size < 3_000_000
    assert _one(sub, "inflates") == (f"error: {RUN}: inflates to more than 100,000,000 bytes (the cap on a run's text); "
                                     "keep at most 1000 documents per query.")


def test_a_fifo_in_runs_does_not_hang(sub):
    os.mkfifo(sub / "runs" / "pipe.trec")
    assert _one(sub, "pipe") == "error: runs/pipe.trec: is not a regular file; remove it."


# ---------------------------------------------------------------- scores.json is recomputed, never trusted

@pytest.fixture(scope="module")
def scored(valid, once_per_session) -> Path:
    """``valid`` scored, once in the whole session; tests copy it (``ssub``)."""

    def make(folder: Path) -> None:
        shutil.copytree(valid, folder / "bm25")
        score_submission(folder / "bm25")

    return once_per_session("submission-bm25-scored", make) / "bm25"


@pytest.fixture()
def ssub(scored, tmp_path) -> Path:
    d = tmp_path / "s"
    shutil.copytree(scored, d)
    return d


def _edit_scores(d: Path, edit) -> None:
    doc = json.loads((d / "scores.json").read_text())
    edit(doc)
    (d / "scores.json").write_text(json.dumps(doc))


def _refusal(d: Path) -> str:
    with pytest.raises(SubmissionError) as info:
        load_scores(d)
    return str(info.value)


def test_scored_submission_matches_its_recomputation(ssub):
    report = validate_submission(ssub)
    assert report.ok and report.scores is not None
    stored = json.loads((ssub / "scores.json").read_text())
    assert report.scores == stored  # every field, to the last bit
    assert main(["submit", "validate", str(ssub)]) == 0


def test_forged_per_query_value(ssub, capsys):
    q = "7"
    real = json.loads((ssub / "scores.json").read_text())["tasks"][TASK]["per_query"]["nDCG@10"][q]
    _edit_scores(ssub, lambda s: s["tasks"][TASK]["per_query"]["nDCG@10"].__setitem__(q, 1.0))
    msg = _refusal(ssub)
    assert (f"scores.json: does not match a recomputation from the runs: task {TASK}, measure nDCG@10, query 7 is 1.0 in "
            f"scores.json, the runs give {real!r}") in msg
    assert "boards show only scores recomputed from the runs and refuse a scores.json that disagrees" in msg
    assert main(["submit", "validate", str(ssub)]) == 2
    lines = capsys.readouterr().err.splitlines()  # the counts, the file, then one error per line
    assert lines[0] == f"gapbench: error: invalid submission {ssub}: 2 errors in 1 file (exit 2)"
    assert lines[1] == f"{ssub / 'scores.json'}:" and "measure nDCG@10, query 7 is 1.0" in lines[2]
    assert len(lines) == 4


def test_forged_mean_and_ci(ssub):
    real = json.loads((ssub / "scores.json").read_text())["tasks"][TASK]["measures"]["nDCG@10"]

    def edit(s):
        s["tasks"][TASK]["measures"]["nDCG@10"] = 0.9
        s["tasks"][TASK]["ci95"]["nDCG@10"] = [0.85, 0.95]
    _edit_scores(ssub, edit)
    msg = _refusal(ssub)
    assert f"task {TASK}, mean nDCG@10 is 0.9 in scores.json, the runs give {real!r}" in msg
    assert f"task {TASK}, lower end of the 95% CI of nDCG@10 is 0.85 in scores.json" in msg


def test_emptied_inputs_no_longer_switch_the_check_off(ssub):
    _edit_scores(ssub, lambda s: s["manifest"].__setitem__("inputs", {}))
    msg = _refusal(ssub)
    assert "manifest.inputs[submission.json] is missing" in msg and f"manifest.inputs[{RUN}] is missing" in msg


def test_swapped_run_path_is_compared_never_opened(ssub, tmp_path):
    def edit(s):
        s["tasks"][TASK]["run"] = "/etc/passwd"
        s["manifest"]["inputs"] = {"/etc/passwd": "0" * 64}
    _edit_scores(ssub, edit)
    msg = _refusal(ssub)
    assert f"task {TASK}, run is '/etc/passwd' in scores.json, the runs give '{RUN}'" in msg
    assert "manifest.inputs[/etc/passwd] is not produced by a recomputation" in msg
    assert main(["leaderboard", "export-trec", str(ssub), "--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()


def test_changed_description_after_scoring(ssub):
    meta = _meta(ssub)
    meta["description"] = "Now claims to be something else."
    _set_meta(ssub, meta)
    msg = _refusal(ssub)
    assert "manifest.inputs[submission.json] is '" in msg and "the file changed since it was scored" in msg


def test_a_thousand_forged_values_are_counted(ssub):
    _edit_scores(ssub, lambda s: s["tasks"][TASK]["per_query"]["R@100"].update(
        {q: 0.5 for q in list(s["tasks"][TASK]["per_query"]["R@100"])[:1000]}))
    msg = _refusal(ssub)
    assert msg.count("does not match a recomputation") == 5
    # R@100 with one gold document per query is 0 or 1, so every forged 0.5 differs.
    assert "1,000 values in all differ from the recomputation" in msg


@pytest.mark.parametrize("edit, needle", [
    (lambda s: s.update(kind="other"), "is not a gapbench scores.json"),
    (lambda s: s["manifest"].update(n_resamples=10**9), "manifest n_resamples 1000000000 is not an integer from 1 to"),
    (lambda s: s["manifest"].update(seed=-1), "manifest seed -1 is not an integer from 0"),
    (lambda s: s["manifest"].update(date="2024-01-01\n| forged |"), "manifest.date '2024-01-01\\n| forged |' is malformed"),
    (lambda s: s["manifest"].update(gapbench_version="<script>"), "manifest.gapbench_version '<script>' is malformed"),
    (lambda s: s.update(full_benchmark_avg={"nDCG@10": 1.0}), "full_benchmark_avg is not produced by a recomputation"),
    (lambda s: s["tasks"].update({"impliret/unispeaker/temporal": {}}),
     "task impliret/unispeaker/temporal is not produced by a recomputation"),
    (lambda s: s["tasks"][TASK].update(n_queries=True), f"task {TASK}, n_queries is True in scores.json, the runs give 1500"),
])
def test_other_tampering(ssub, edit, needle):
    _edit_scores(ssub, edit)
    assert needle in _refusal(ssub)


def test_score_refuses_a_negative_seed(sub, capsys):
    assert main(["submit", "score", str(sub), "--seed", "-1"]) == 2
    assert "seed -1 is not an integer from 0 to 2**63 - 1" in capsys.readouterr().err
    assert not (sub / "scores.json").exists()


def test_results_of_the_same_bytes_come_from_the_cache(ssub):
    """A run validated and scored once is not parsed again (the board build stays fast); the cached report and
    scores equal the computed ones, and an unreadable cache entry is recomputed."""
    from gapbench.cache import cache_dir, clear

    if cache_dir("submissions").exists():
        clear("submissions")
    first = validate_submission(ssub)
    assert list(first.rankings) == [TASK] and first.scores is not None
    kept = {kind: sorted((cache_dir("submissions") / kind).iterdir()) for kind in ("valid", "scores")}
    assert [len(v) for v in kept.values()] == [1, 1]
    second = validate_submission(ssub)
    assert second.rankings == {} and second.scores == first.scores
    assert [str(p) for p in second.problems] == [str(p) for p in first.problems]
    for path in kept["valid"] + kept["scores"]:
        path.write_text("{not json")
    third = validate_submission(ssub)
    assert list(third.rankings) == [TASK] and third.scores == first.scores
