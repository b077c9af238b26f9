"""The pyfunc wrapper of bert_pipeline.serving (the pipelines' logging: tests/pipelines), and
a logged classifier served by `mlflow models serve` for the answers to bad requests."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from types import SimpleNamespace

import mlflow
import pandas as pd
import pytest
import torch
from mlflow.exceptions import MlflowException

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
from bert_pipeline.params import ConfigError
from bert_pipeline.serving import ARTIFACT, BertPyfunc, log_bert_model
from tests.glue.helpers import tiny_checkpoint
from tests.mlflow_store import new_store
from tests.test_readme_commands import BIN, _serve, _stop

# One xdist worker (`--dist loadgroup`) runs this module: its served models are built once.
pytestmark = pytest.mark.xdist_group("serving")


def test_make_test_keeps_this_module_on_one_worker(request):
    """Under `make test` (`--dist loadgroup`) the group reaches the scheduler: pytest 9.2 drops it
    silently (pytest-dev/pytest-xdist#1386), and every worker then builds the module's fixtures."""
    if getattr(request.config.option, "loadgroup", False):
        assert request.node.nodeid.endswith("@serving")


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


def _reason(error: pytest.ExceptionInfo) -> str:
    """The refusal as the scoring server sends it: an MLflow error that it answers with 400,
    its one-line `reason` field."""
    assert error.value.get_http_status_code() == 400
    return json.loads(error.value.serialize_as_json())["reason"]


def test_input_without_text_a_is_refused_with_its_columns(classifier: BertPyfunc):
    with pytest.raises(MlflowException) as error:
        classifier.predict(None, pd.DataFrame({"sentence": ["x"]}))
    assert _reason(error) == (
        "input has columns ['sentence']; expected ['text_a'] and optionally ['text_b']"
    )


def _served(root, model_cls, max_rows: int = 3, max_seq_length: int = 16, **kwargs) -> BertPyfunc:
    pretrained = tiny_checkpoint()
    torch.manual_seed(0)
    model = model_from_checkpoint(pretrained, model_cls, **kwargs)
    labels = ["O", "B-PER", "I-PER"] if "num_labels" in kwargs else None
    folder = write_checkpoint(
        model_to_checkpoint(model, pretrained["tokenizer_files"], labels=labels), root / "m"
    )
    wrapper = BertPyfunc()
    options = {"max_seq_length": max_seq_length, "doc_stride": 4, "max_query_length": 6}
    options |= {"n_best_size": 20, "max_answer_length": 30}  # as finetune_squad logs them
    options |= {"max_rows": max_rows, "max_text_chars": 200}  # small, to be exceeded
    wrapper.load_context(SimpleNamespace(artifacts={ARTIFACT: str(folder)}, model_config=options))
    return wrapper


@pytest.fixture(scope="module")
def tagger(tmp_path_factory) -> BertPyfunc:
    return _served(tmp_path_factory.mktemp("tagger"), BertForTokenClassification, num_labels=3)


@pytest.fixture(scope="module")
def reader(tmp_path_factory) -> BertPyfunc:
    return _served(tmp_path_factory.mktemp("reader"), BertForQuestionAnswering)


def test_the_ner_tagger_answers_one_tag_per_word(tagger: BertPyfunc):
    """Served like GLUE's: words separated by spaces in, a tag per word out (a long sentence
    is cut into windows)."""
    long = " ".join(["the cat finds the letter"] * 6)
    tagged = tagger.predict(None, pd.DataFrame({"text_a": ["a farmer hears .", long]}))
    assert tagged["tokens"].tolist()[0] == ["a", "farmer", "hears", "."]
    assert tagged["tags"].map(len).tolist() == [4, 30]
    assert set(sum(tagged["tags"], [])) <= {"O", "B-PER", "I-PER"}


NONEMPTY = "expected a non-empty string"
TAGGER_REFUSALS = {
    "no rows": ({"text_a": []}, "input has no rows; expected at least one row of ['text_a']"),
    "blank": ({"text_a": ["a farmer .", " "]}, f"text_a of row 1 is blank; {NONEMPTY}"),
    "null": ({"text_a": ["a farmer .", None]}, f"text_a of row 1 is null; {NONEMPTY}"),
    "a number": ({"text_a": [7]}, "text_a of row 0 is 7 (int); expected a string"),
    "a list": (
        {"text_a": [["a", "farmer"]]},
        "text_a of row 0 is ['a', 'farmer'] (list); expected a string",
    ),
    "no text_a": ({"words": ["a farmer ."]}, "input has columns ['words']; expected ['text_a']"),
    "too long": (
        {"text_a": ["a farmer ." * 21]},
        "text_a of row 0 has 210 characters; the model takes at most max_text_chars=200",
    ),
    "too many rows": (
        {"text_a": ["a farmer ."] * 4},
        "input has 4 rows; the model takes at most max_rows=3",
    ),
}


def test_the_squad_reader_answers_a_span_of_the_context(reader: BertPyfunc):
    context = "the farmer hears two birds follow the river to the old mill ."
    frame = pd.DataFrame({"question": ["who hears ?", "what follows ?"], "context": [context] * 2})
    answers = reader.predict(None, frame)
    assert list(answers.columns) == ["answer", "null_score_diff"]
    assert all(a and a in context for a in answers["answer"])


READER_REFUSALS = {
    "no context": (
        {"question": ["who ?"]},
        "input has columns ['question']; expected ['question', 'context']",
    ),
    "blank question": (
        {"question": [""], "context": ["the farmer hears ."]},
        f"question of row 0 is blank; {NONEMPTY}",
    ),
    "null context": (
        {"question": ["who ?", "what ?"], "context": ["the farmer hears .", None]},
        f"context of row 1 is null; {NONEMPTY}",
    ),
    "a number as context": (
        {"question": ["who ?"], "context": [3.5]},
        "context of row 0 is 3.5 (float); expected a string",
    ),
    "too long": (
        {"question": ["who ?"], "context": ["the farmer hears ." * 12]},
        "context of row 0 has 216 characters; the model takes at most max_text_chars=200",
    ),
}


REFUSALS = {"tagger": TAGGER_REFUSALS, "reader": READER_REFUSALS}


@pytest.mark.parametrize("model, case", [(m, c) for m in REFUSALS for c in REFUSALS[m]])
def test_the_tagger_and_the_reader_refuse_a_bad_request_in_one_line(request, model, case):
    table, reason = REFUSALS[model][case]
    with pytest.raises(MlflowException) as error:
        request.getfixturevalue(model).predict(None, pd.DataFrame(table))
    assert _reason(error) == reason


def test_the_window_defaults_to_the_models_positions_and_cannot_exceed_them(
    classifier: BertPyfunc, tmp_path
):
    """A model logged without `max_seq_length` reads as many tokens as it has positions (a
    128-token default indexed past a 64-position model); more than that is refused at load."""
    assert classifier.model.max_seq_length == tiny_checkpoint()["config"]["max_position_embeddings"]
    long = "word " * 300
    assert len(classifier.predict(None, pd.DataFrame({"text_a": [long]}))) == 1
    with pytest.raises(ConfigError, match=r"model_config.max_seq_length=512 must be <= the"):
        _served(tmp_path, BertForQuestionAnswering, max_seq_length=512)


def test_a_request_limit_below_one_is_refused_when_the_model_loads(tmp_path):
    with pytest.raises(ConfigError, match=r"parameter model_config.max_rows=0 must be >= 1"):
        _served(tmp_path, BertForQuestionAnswering, max_rows=0)


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> str:
    """The tiny classifier logged as the pipelines log it, served by `make serve`'s command with
    small request limits given at serve time; its /invocations URL."""
    root = tmp_path_factory.mktemp("served")
    pretrained = tiny_checkpoint()
    torch.manual_seed(0)
    model = model_from_checkpoint(pretrained, BertForSequenceClassification, num_labels=3)
    checkpoint = model_to_checkpoint(model, pretrained["tokenizer_files"], labels=["a", "b", "c"])
    uri = new_store(root)
    mlflow.set_tracking_uri(uri)
    try:
        artifacts = (root / "mlartifacts").as_uri()  # not ./mlruns of the checkout
        with mlflow.start_run(experiment_id=mlflow.create_experiment("serving", artifacts)):
            example = pd.DataFrame({"text_a": ["a farmer hears."], "text_b": ["two birds."]})
            logged = log_bert_model(write_checkpoint(checkpoint, root / "m"), example)
    finally:
        mlflow.set_tracking_uri(None)
    command = [str(BIN / "mlflow"), "models", "serve", "-m", logged["model_uri"]]
    command += ["--env-manager", "local", "--host", "127.0.0.1", "--port"]
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    env["SERVING_MODEL_CONFIG"] = json.dumps({"max_rows": 3, "max_text_chars": 200})
    server, url, _ = _serve(lambda port: [*command, str(port)], "/ping", root, env, parse=bytes)
    yield f"{url}/invocations"
    _stop(server)


def _invoke(url: str, body: dict) -> tuple[int, str]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _split(rows: list, columns=("text_a",)) -> dict:
    return {"dataframe_split": {"columns": list(columns), "data": rows}}


PAIR = ("text_a", "text_b")
HTTP_REFUSALS = {
    "no rows": (_split([]), "input has no rows; expected at least one row of ['text_a']"),
    "null text_a": (_split([[None]]), f"text_a of row 0 is null; {NONEMPTY}"),
    "text_a missing from a record": (
        {"dataframe_records": [{"text_a": "a farmer hears."}, {"text_b": "two birds."}]},
        f"text_a of row 1 is null; {NONEMPTY}",
    ),
    "empty text_a": (_split([["ok."], [""]]), f"text_a of row 1 is blank; {NONEMPTY}"),
    "a number as text_a": (_split([[5]]), "text_a of row 0 is 5 (int); expected a string"),
    "a number as text_b": (
        _split([["a farmer hears.", 3]], PAIR),
        "text_b of row 0 is 3 (int); expected a string",
    ),
    "too many rows": (
        _split([["a farmer hears."]] * 4),
        "input has 4 rows; the model takes at most max_rows=3",
    ),
    "a text too long": (
        _split([["x" * 201]]),
        "text_a of row 0 has 201 characters; the model takes at most max_text_chars=200",
    ),
}


@pytest.mark.parametrize("case", HTTP_REFUSALS)
def test_the_server_answers_a_bad_request_400_with_a_one_line_reason(served: str, case):
    """No "unexpected error" and stack trace: the reason, as its own field (MLflow prefixes
    the message with the request's data)."""
    body, reason = HTTP_REFUSALS[case]
    status, answer = _invoke(served, body)
    assert status == 400, answer
    assert "Traceback" not in answer and "stack_trace" not in json.loads(answer)
    assert json.loads(answer)["reason"] == reason
    assert json.loads(answer)["message"].endswith(f"Error: {reason}")


def test_the_server_refuses_wrong_columns_by_the_signature(served: str):
    """MLflow checks the signature before the model sees the input: text_a is required."""
    status, answer = _invoke(served, _split([["a farmer hears."]], ["sentence"]))
    assert status == 400, answer
    assert "Traceback" not in answer and "stack_trace" not in json.loads(answer)
    assert "Model is missing inputs ['text_a']" in json.loads(answer)["message"]


def test_the_server_answers_within_the_limits(served: str):
    """Up to max_rows rows of at most max_text_chars characters; an empty or null text_b is a
    single sentence."""
    rows = [["a farmer hears.", ""], ["two birds.", None], ["x" * 200, "the river paints."]]
    status, answer = _invoke(served, _split(rows, PAIR))
    assert status == 200, answer
    predictions = json.loads(answer)["predictions"]
    assert [p["label"] in {"a", "b", "c"} for p in predictions] == [True] * 3
