"""The pyfunc wrapper of bert_pipeline.serving, without MLflow runs (those: tests/pipelines)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from bert_pipeline.model import (
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)
from bert_pipeline.model.checkpoint import (
    model_from_checkpoint,
    model_to_checkpoint,
    write_checkpoint,
)
from bert_pipeline.serving import ARTIFACT, BertPyfunc
from tests.glue.helpers import tiny_checkpoint


@pytest.fixture(scope="module")
def classifier(tmp_path_factory) -> BertPyfunc:
    pretrained = tiny_checkpoint()
    torch.manual_seed(0)
    model = model_from_checkpoint(pretrained, BertForSequenceClassification, num_labels=3)
    labels = ["entailment", "neutral", "contradiction"]
    folder = tmp_path_factory.mktemp("serving") / "model"
    checkpoint = model_to_checkpoint(model, pretrained["tokenizer_files"], labels=labels)
    write_checkpoint(checkpoint, folder)
    wrapper = BertPyfunc()
    wrapper.load_context(SimpleNamespace(artifacts={ARTIFACT: str(folder)}, model_config=None))
    return wrapper


def test_single_sentences_and_pairs_mixed_keep_their_order(classifier: BertPyfunc):
    rows = pd.DataFrame(
        {
            "text_a": ["the cat finds the letter.", "a farmer hears.", "two birds follow."],
            "text_b": [None, "the river paints.", ""],  # "" counts as no second segment
        }
    )
    together = classifier.predict(None, rows)
    one_by_one = pd.concat(
        [classifier.predict(None, rows.iloc[[i]]) for i in range(len(rows))], ignore_index=True
    )
    pd.testing.assert_frame_equal(together, one_by_one)
    assert set(together["label"]) <= {"entailment", "neutral", "contradiction"}
    assert together["score"].between(1 / 3, 1).all()


def test_input_without_text_a_is_refused_with_its_columns(classifier: BertPyfunc):
    with pytest.raises(ValueError, match=r"input has columns \['sentence'\]; expected text_a"):
        classifier.predict(None, pd.DataFrame({"sentence": ["x"]}))


def _served(tmp_path, model_cls, **kwargs) -> BertPyfunc:
    pretrained = tiny_checkpoint()
    torch.manual_seed(0)
    model = model_from_checkpoint(pretrained, model_cls, **kwargs)
    labels = ["O", "B-PER", "I-PER"] if "num_labels" in kwargs else None
    folder = write_checkpoint(
        model_to_checkpoint(model, pretrained["tokenizer_files"], labels=labels), tmp_path / "m"
    )
    wrapper = BertPyfunc()
    options = {"max_seq_length": 16, "doc_stride": 4, "max_query_length": 6}
    options |= {"n_best_size": 20, "max_answer_length": 30}  # as finetune_squad logs them
    wrapper.load_context(SimpleNamespace(artifacts={ARTIFACT: str(folder)}, model_config=options))
    return wrapper


def test_the_ner_tagger_answers_one_tag_per_word(tmp_path):
    """Served like GLUE's: words separated by spaces in, a tag per word out (an empty
    sentence has none; a long one is cut into windows)."""
    tagger = _served(tmp_path, BertForTokenClassification, num_labels=3)
    long = " ".join(["the cat finds the letter"] * 6)
    tagged = tagger.predict(None, pd.DataFrame({"text_a": ["a farmer hears .", "", long]}))
    assert tagged["tokens"].tolist()[:2] == [["a", "farmer", "hears", "."], []]
    assert tagged["tags"].map(len).tolist() == [4, 0, 30]
    assert set(sum(tagged["tags"], [])) <= {"O", "B-PER", "I-PER"}


def test_the_squad_reader_answers_a_span_of_the_context(tmp_path):
    reader = _served(tmp_path, BertForQuestionAnswering)
    context = "the farmer hears two birds follow the river to the old mill ."
    frame = pd.DataFrame({"question": ["who hears ?", "what follows ?"], "context": [context] * 2})
    answers = reader.predict(None, frame)
    assert list(answers.columns) == ["answer", "null_score_diff"]
    assert all(a and a in context for a in answers["answer"])
    with pytest.raises(ValueError, match=r"expected \['question', 'context'\]"):
        reader.predict(None, pd.DataFrame({"question": ["who ?"]}))
