"""The watch on a model's first answers (gapbench.llm.competence): a model that answers null, echoes the prompt or
answers what cannot be read stops each LLM stage within its first calls, naming --llm-base-url / --llm-model and
what model can do the job; a model that answers well is never stopped. Real local servers: the scripted ones of
tests/llm_server.py and tests/obliq_server.py, and llama.cpp's server with the embedded SmolLM2."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from llm_server import LLMServer
from obliq_server import ObliqServer
from test_obliq_build import DOCS, LENS, client, options, world

from gapbench.analyses.obliq_build.build import build_obliq
from gapbench.analyses.obliq_build.context import judge_answer
from gapbench.errors import ConfigError, GapbenchError, ModelTooWeakError
from gapbench.llm.client import ChatRequest, LLMClient
from gapbench.llm.competence import (
    copied,
    generic_verdict,
    listwise_verdict,
    settings,
    synthesis_verdict,
    values_verdict,
    watching,
)
from gapbench.types import Corpus, Document

# SmolLM2-135M's real first annotation answer to the build below (llama.cpp, json_object grammar): a placeholder, a
# null and two documents copied back as their "values"
SMOLLM2_ANSWER = ('{"annotations": [{"id": "D1", "value": "..."}, {"id": "D2", "value": null} , { "id": "D3", "value": '
                  '"The courier kept postponing; the sofa came eleven days after the promised date"} , { "id": "D4", '
                  '"value": "My birthday present turned up a fortnight after the party was over" }]}')


def annotate_prompt(doc_ids: list[str]) -> str:
    docs = "\n".join(f'<document id="D{i}">\n{DOCS[d]}\n</document>' for i, d in enumerate(doc_ids, 1))
    return f"You read documents and write, for each, its value of: {LENS}\n\n{docs}"


def test_verdicts_by_hand():
    prompt = annotate_prompt(["a1", "a2", "a4", "a3"])
    assert judge_answer("annotations", prompt, SMOLLM2_ANSWER) == "echo"
    assert judge_answer("annotations", prompt, '{"annotations": [{"id": "D1", "value": null}, {"id": "D2", '
                        '"value": "n/a"}]}') == "null"
    assert judge_answer("annotations", prompt, "Sure! These documents are interesting.") == "invalid"
    assert judge_answer("annotations", prompt, '{"annotations": []}') == "invalid"
    # one usable value makes the answer usable; a grade is a value
    assert judge_answer("annotations", prompt, '{"annotations": [{"id": "D1", "value": null}, {"id": "D2", "value": '
                        '"frustration that an order came late"}]}') == "ok"
    assert judge_answer("judgements", prompt, '{"judgements": [{"id": "D1", "grade": 2}]}') == "ok"
    # copies: wholly inside the prompt (4 words or more), or half of its 5-word runs in it
    assert copied("the sofa came eleven days", prompt) and not copied("the sofa came", prompt)
    assert copied("Ziggy walked me through the whole setup over phone without rushing",
                  "Ziggy walked me through the whole setup over the phone without rushing.")
    assert not copied("annoyance at a shipment arriving much later than promised", prompt)
    assert [generic_verdict("p", t) for t in ("", " null ", "...", "[2] > [1]")] == ["null", "null", "null", "ok"]
    assert values_verdict(prompt, [None, "...", 3]) == "ok"
    assert [listwise_verdict("", t) for t in ("[2] > [1]", "2, 1, 3", "2 > 1", "It opened in 80 AD.")] == [
        "ok", "ok", "ok", "invalid"]
    # a synthesis answer keeps its document (a rewrite, even unchanged) and copies neither instructions nor passages
    from gapbench.analyses.argus.remedy.views import synthesis_prompt

    doc = "We trained near Soyu Stadium every day."
    synth = synthesis_prompt(doc, {"Soyu Stadium": ["Soyu Stadium is a stadium in Akita, Japan."]})
    assert [synthesis_verdict(synth, t) for t in (
        "We trained near Soyu Stadium, Soyu Stadium is a stadium, every day.", doc, "echo 0123456789abcdef",
        "Read the Input Text. Read the Candidate Entities, each given with reference passages about it.")] == [
        "ok", "ok", "invalid", "echo"]


def test_settings_default_environment_and_refusals(monkeypatch):
    assert settings() == (5, 0.6)
    monkeypatch.setenv("GAPBENCH_LLM_WATCH_WINDOW", "10")
    monkeypatch.setenv("GAPBENCH_LLM_WATCH_THRESHOLD", "0.5")
    assert settings() == (10, 0.5) and settings(4, 1.0) == (4, 1.0)
    monkeypatch.setenv("GAPBENCH_LLM_WATCH_THRESHOLD", "1.5")
    with pytest.raises(ConfigError, match=r"\$GAPBENCH_LLM_WATCH_THRESHOLD='1.5' is not accepted; give a share"):
        settings()
    monkeypatch.setenv("GAPBENCH_LLM_WATCH_WINDOW", "many")
    with pytest.raises(ConfigError, match=r"\$GAPBENCH_LLM_WATCH_WINDOW='many' is not accepted"):
        settings()


class EchoServer(LLMServer):
    """Answers every prompt with its passages: a model that copies its input back."""

    def answer(self, prompt: str) -> tuple[str, str]:
        return " ".join(prompt.split()[3:]), "echo"


@pytest.mark.parametrize("kind", ["echo", "invalid", "good"])
def test_chat_many_under_a_watch_stops_within_the_first_answers(kind, tmp_path):
    prompts = [f"Query: query {i}\n" + "\n".join(f"[{j}] passage {j} of query {i}" for j in (1, 2, 3))
               for i in range(12)]
    srv = EchoServer() if kind == "echo" else LLMServer(answer_style="prose" if kind == "invalid" else None)
    with srv:
        llm = LLMClient(base_url=srv.base_url, model="m", cache=tmp_path / "c.sqlite", max_retries=0, concurrency=4)
        with watching(llm, "test stage", listwise_verdict) as watch:
            if kind == "good":
                answers = llm.chat_many([ChatRequest(p) for p in prompts])
                assert len(answers) == 12 and watch.counts == {"ok": 5}
                return
            with pytest.raises(ModelTooWeakError) as err:
                llm.chat_many([ChatRequest(p) for p in prompts])
        assert srv.counts["chat"] == 3  # 3 unusable of the first 5 stop it: the other 9 requests are not sent
    text = str(err.value)
    assert text.startswith("test stage: the model 'm' at http://127.0.0.1:")
    said = "copied the prompt back" if kind == "echo" else "could not be read"
    assert f"of its first 3 answers, 3 {said} (e.g. '" in text
    assert "stopped with 9 requests of the stage not sent" in text
    assert "--llm-base-url and --llm-model" in text and "7B parameters or more" in text
    assert err.value.counts == {kind: 3}
    assert llm.watch is None  # the watch ends with its block


def test_model_too_weak_is_an_error_of_the_error_family():
    # it lives in gapbench.errors beside the others (issue 25), so the CLI exits 2 with its one line, as for any
    # GapbenchError; the watch raises that very class
    import gapbench.errors
    import gapbench.llm.competence

    assert ModelTooWeakError.__module__ == "gapbench.errors" and issubclass(ModelTooWeakError, GapbenchError)
    assert gapbench.llm.competence.ModelTooWeakError is gapbench.errors.ModelTooWeakError
    err = ModelTooWeakError("stage: weak", stage="stage", counts={"null": 3})
    assert (str(err), err.stage, err.counts) == ("stage: weak", "stage", {"null": 3})


class NullServer(ObliqServer):
    def _annotate(self, prompt: str) -> dict:
        return {"annotations": [{"id": sid, "value": None} for sid, _ in self._docs(prompt)]}


class CopyServer(ObliqServer):
    def _annotate(self, prompt: str) -> dict:
        return {"annotations": [{"id": sid, "value": self.world.docs[d]} for sid, d in self._docs(prompt)]}


@pytest.mark.parametrize("make,kind", [(NullServer, "null"), (CopyServer, "echo"),
                                       (lambda w: ObliqServer(w, garble={"annotate"}), "invalid")],
                         ids=["null", "echo", "invalid"])
def test_obliq_build_stops_in_its_first_annotation_calls(make, kind, tmp_path):
    with make(world()) as srv:
        with pytest.raises(ModelTooWeakError) as err:
            build_obliq(str(corpus_file(tmp_path)), options(tmp_path / "t", llm_client=client(srv, tmp_path / "c")))
        assert srv.counts["chat"] == 3 and srv.kinds == ["annotate"] * 3  # of its 6 annotation calls
    assert err.value.stage == "obliq build: annotate" and err.value.counts == {kind: 3}
    assert "stopped with 3 requests of the stage not sent" in str(err.value)
    assert not (tmp_path / "t").exists()  # the folder it made is removed; the 3 answers stay in the LLM cache
    with make(world()) as srv:  # a re-run stops again without a call
        with pytest.raises(ModelTooWeakError):
            build_obliq(str(corpus_file(tmp_path)), options(tmp_path / "t", llm_client=client(srv, tmp_path / "c")))
        assert srv.counts["chat"] == 0


def corpus_file(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in DOCS.items()), encoding="utf-8")
    return path


def test_obliq_build_cli_exits_2_naming_the_flags(tmp_path, capsys):
    from gapbench.cli import main

    with ObliqServer(world(), garble={"annotate"}) as srv:
        code = main(["obliq", "build", str(corpus_file(tmp_path)), "--lens", LENS, "--out", str(tmp_path / "t"),
                     "--batch-size", "4", "--llm-base-url", srv.base_url, "--llm-model", "judge"])
        assert srv.kinds == ["annotate"] * 3  # and the probe's 4 calls that timed the printed estimate
        assert srv.counts["chat"] == 3 + 4
    err = capsys.readouterr().err
    assert code == 2 and "obliq build: annotate: the model 'judge'" in err and "--llm-base-url and --llm-model" in err
    assert "\ntime: about " in err  # the estimate printed before the calls has its time range


def _cached(home: Path) -> int:
    path = home / "cache" / "llm" / "responses.sqlite"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]


def test_obliq_build_on_the_embedded_smollm2_stops_within_its_first_batches(tmp_path, embedded_smollm2, capsys,
                                                                            monkeypatch):
    """The command in-process without an endpoint, on the embedded server tests/fx_llm.py started for this process
    (tests/test_local_llm.py checks a command's own start and stop of it)."""
    from gapbench.cli import main

    corpus = corpus_file(tmp_path)
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    code = main(["obliq", "build", str(corpus), "--lens", LENS, "--out", str(tmp_path / "t"), "--batch-size", "4",
                 "--pool-retrievers", "bm25"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "obliq build: annotate: the model 'SmolLM2-135M-Instruct.Q4_1.gguf'" in err
    assert "--llm-base-url and --llm-model" in err and "7B parameters or more" in err
    # of the 6 annotation calls, 3 were made (each answer is in the cache); no stage after annotation was reached
    assert _cached(tmp_path / "home") == 3 and "stopped with 3 requests of the stage not sent" in err
    assert not (tmp_path / "t").exists()
    # before the calls, the estimate's time range from the model's speed, measured on a short probe
    assert "time: about " in err and "measured on SmolLM2-135M-Instruct.Q4_1.gguf" in err


def beir_folder(root: Path) -> Path:
    """Two queries over ten documents, a BEIR folder."""
    root.mkdir()
    docs = {f"d{i}": f"document {i} about {'rivers' if i < 5 else 'mountains'} and item {i}" for i in range(10)}
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in docs.items()))
    (root / "queries.jsonl").write_text('{"_id": "q1", "text": "rivers"}\n{"_id": "q2", "text": "mountains"}\n')
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td7\t1\n")
    return root


@pytest.mark.parametrize("style", ["prose", None])
def test_gap_stops_when_the_verifier_cannot_rank(style, tmp_path, capsys, monkeypatch):
    from gapbench.cli import main

    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))  # a cache of its own: every answer is a call
    folder = beir_folder(tmp_path / "task")
    with LLMServer(answer_style=style) as srv:
        code = main(["gap", str(folder), "--retrievers", "bm25", "--llm-base-url", srv.base_url, "--llm-model",
                     "judge", "--pool-sizes", "", "--depth", "10", "--verifier", "tournament:concurrency=1"])
        calls = srv.counts["chat"]
    err = capsys.readouterr().err
    if style is None:  # rankings the tournament reads: never stopped
        assert code == 0 and "cannot do this job" not in err and calls >= 2  # a ranking a query, at least
        return
    # prose without passage ids: the first ranking and its re-asks, 3 answers that cannot be read, stop the gap
    assert code == 2 and calls == 3
    assert "gap: the verifier's rankings: the model 'judge'" in err and "3 could not be read" in err
    assert "--llm-base-url and --llm-model" in err


def test_coverage_stops_when_the_model_names_no_entity(tmp_path, capsys):
    from test_coverage import FIXTURE, CoverageServer

    from gapbench.cli import main

    class Chatty(CoverageServer):
        def answer(self, prompt: str) -> tuple[str, str]:
            if prompt.startswith("Extract the key entities"):
                return "This document talks about several interesting things.", "entities"
            return super().answer(prompt)

    with Chatty() as srv:
        code = main(["coverage", str(FIXTURE), "--retrievers", "bm25", "--entities", "llm", "--clusters", "3",
                     "--llm-base-url", srv.base_url, "--llm-model", "cov-weak", "--out", str(tmp_path / "a")])
        assert code == 2 and srv.counts["chat"] == 3  # of the fixture's 15 documents
    err = capsys.readouterr().err
    assert "coverage: LLM entities: the model 'cov-weak'" in err and "3 could not be read" in err
    assert "stopped with 12 requests of the stage not sent" in err



@pytest.mark.parametrize("answer", ["copy", "chat", "rewrite"])
def test_argus_synthesis_stops_when_the_model_does_not_rewrite(answer, tmp_path):
    from test_argus_augment import SynthServer, _diag

    from gapbench.analyses.argus.remedy.kb import ReferenceKB
    from gapbench.analyses.argus.remedy.views import synthesis_views

    class Weak(SynthServer):
        def answer(self, prompt: str) -> tuple[str, str]:
            if answer == "copy":  # the instructions back
                return prompt.split("### Instructions\n", 1)[1].split("\n\n", 1)[0], "synthesis"
            if answer == "chat":  # not a rewrite of the document
                return "Sure! Stadiums are large venues for sport and concerts.", "synthesis"
            return super().answer(prompt)  # the careful editor

    corpus = Corpus([Document(str(i), f"Team {i} trained near Soyu Stadium every day.") for i in range(8)])
    kb = ReferenceKB.packaged("landmarks-oracle")
    diag = _diag(corpus, {str(i): [("Soyu Stadium", "FAC")] for i in range(8)})
    hits = {str(i): {"Soyu Stadium": ("Q4701236",)} for i in range(8)}
    with Weak() as srv:
        llm = LLMClient(base_url=srv.base_url, model="judge", cache=tmp_path / "llm.sqlite", concurrency=1)
        if answer == "rewrite":
            views = synthesis_views(corpus, diag, kb, llm, 2, hits=hits)
            assert len(views) == 8 and srv.counts["chat"] == 8
            return
        with pytest.raises(ModelTooWeakError) as err:
            synthesis_views(corpus, diag, kb, llm, 2, hits=hits)
        assert srv.counts["chat"] == 3  # of 8
    kind = "echo" if answer == "copy" else "invalid"
    assert err.value.counts == {kind: 3} and str(err.value).startswith("argus synthesis: the model 'judge'")
