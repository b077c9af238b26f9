"""A GLUE export names its classes as the task does, for transformers and the serving endpoint."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bert_pipeline.glue.config import GlueConfig
from bert_pipeline.glue.finetune import finetune_task
from bert_pipeline.glue.loading import load_glue_tsv_task
from bert_pipeline.glue.tasks import TASKS, get_task
from bert_pipeline.model.checkpoint import write_checkpoint
from bert_pipeline.serving import ARTIFACT, BertPyfunc
from tests.glue.helpers import tiny_checkpoint, write_glue_tsv

# The hub's nyu-mll/glue ClassLabel names, in class-id order.
HUB_NAMES = {
    "cola": ["unacceptable", "acceptable"],
    "sst2": ["negative", "positive"],
    "mrpc": ["not_equivalent", "equivalent"],
    "qqp": ["not_duplicate", "duplicate"],
    "mnli": ["entailment", "neutral", "contradiction"],
    "qnli": ["entailment", "not_entailment"],
    "rte": ["entailment", "not_entailment"],
    "wnli": ["not_entailment", "entailment"],
}


def test_every_classification_task_names_its_classes_as_the_hub():
    assert {n: list(t.label_names) for n, t in TASKS.items() if not t.is_regression} == HUB_NAMES
    assert TASKS["stsb"].label_names is None


def test_sst2_export_answers_label_names_in_transformers_and_serving(tmp_path):
    task = get_task("sst2")
    data = load_glue_tsv_task(write_glue_tsv(tmp_path / "glue", tasks=["sst2"]), "sst2")
    config = GlueConfig(learning_rates=[1e-3], seeds=[1], epochs=1, max_seq_length=32)
    config.progress_bar = False
    result = finetune_task(
        task, data["train"], data["dev"], data["test"], tiny_checkpoint(), config
    )
    assert result.checkpoint["config"]["id2label"] == {"0": "negative", "1": "positive"}
    folder = write_checkpoint(result.checkpoint, tmp_path / "sst2")
    served = BertPyfunc()
    served.load_context(SimpleNamespace(artifacts={ARTIFACT: str(folder)}, model_config=None))
    texts = data["dev"]["text_a"].head(3).tolist()
    labels = served.predict(None, data["dev"][["text_a"]].head(3))["label"]
    assert set(labels) <= {"negative", "positive"}

    transformers = pytest.importorskip("transformers")
    classify = transformers.pipeline("text-classification", model=str(folder), top_k=None)
    answers = classify(texts)
    assert all({a["label"] for a in answer} == {"negative", "positive"} for answer in answers)
    assert [max(a, key=lambda a: a["score"])["label"] for a in answers] == labels.tolist()
