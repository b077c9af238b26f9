"""BERT folders as MLflow pyfunc models: logged with the project's code, registered, served.

`log_bert_model` is how pretraining and every fine-tuning task put a model into MLflow (called
through `bert_pipeline.tracking.log_model`): a LoggedModel of the active run holding the HF-format
folder (weights, config, tokenizer, model card), this package as `code_paths` and pinned
requirements, so that `mlflow.pyfunc.load_model("models:/<name>/<version>")` needs nothing from the
project checkout.

Input: a table with `text_a` and optionally `text_b` (sentence pairs; empty for single sentences).
Output of a fine-tuned classifier: `label` (the label name) and `score` (its softmax probability);
of a regression task (STS-B): `score`; of the pretrained encoder: `cls_embedding` (the last
layer's [CLS] vector; `last_embedding`, its last token's, for a left-to-right encoder) and
`mean_embedding` (the mean over the tokens), lists of floats.
The NER tagger reads `text_a` (words separated by spaces) and answers `tokens` and `tags`; the
SQuAD reader reads `question` and `context` and answers `answer` and `null_score_diff`; the
SWAG model reads `context`, `start` and `ending0`..`ending3` and answers `label` (the index of
the most likely ending) and `score` (its softmax probability).

A request the model cannot answer (no rows, a missing, null, blank or non-string text, more rows
or longer texts than its `RequestLimits`) raises `BadRequest`: the scoring server answers 400
with a one-line reason and no stack trace.
"""

from __future__ import annotations

import importlib.metadata
import reprlib
import tempfile
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import mlflow
import pandas as pd
import torch
from mlflow.exceptions import MlflowException
from mlflow.models import ModelSignature
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE
from mlflow.types.schema import ColSpec, Schema

import bert_pipeline
from bert_pipeline.model.checkpoint import MODEL_CARD_FILE
from bert_pipeline.params import parse_params, require
from bert_pipeline.swag.data import ENDINGS

ARTIFACT = "model"
REQUIREMENTS = ("torch", "tokenizers", "safetensors", "pandas", "numpy", "mlflow")


@dataclass
class RequestLimits:
    """The most one request may ask for. Every text is tokenized whole before it is truncated,
    and the tagger and the reader run one window per `max_seq_length` tokens, so an unbounded
    request holds the server's memory and time from every other client. Logged in each model's
    `model_config`; `mlflow models serve` takes other values from `SERVING_MODEL_CONFIG`."""

    max_rows: int = 64
    max_text_chars: int = 10_000

    def check(self, root: str) -> None:
        for name in ("max_rows", "max_text_chars"):
            require(getattr(self, name) >= 1, root, name, "must be >= 1", getattr(self, name))


LIMITS = tuple(f.name for f in fields(RequestLimits))


class BadRequest(MlflowException):
    """An input the model cannot answer; the scoring server answers it with HTTP 400 and no
    stack trace. The server prefixes `message` with the request's data, so the one-line
    reason is also the answer's own `reason` field."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, error_code=INVALID_PARAMETER_VALUE, reason=reason)


class BertPyfunc(mlflow.pyfunc.PythonModel):
    """Answers with an exported BERT folder, by its architecture (config.json): a sentence
    classifier or the encoder (`SentenceModel`), a tagger (`TaggerModel`), a reader
    (`ReaderModel`), a multiple-choice model (`ChoiceModel`)."""

    def load_context(self, context) -> None:
        from bert_pipeline.data.tokenizer import tokenizer_from_files
        from bert_pipeline.model.checkpoint import read_checkpoint

        folder = context.artifacts[ARTIFACT]
        checkpoint = read_checkpoint(folder)
        options = dict(context.model_config or {})
        limits = {name: options.pop(name) for name in LIMITS if name in options}
        self.limits = parse_params(RequestLimits, limits, "model_config")
        self.batch_size = int(options.pop("batch_size", 32))
        positions = int(checkpoint["config"]["max_position_embeddings"])
        length = int(options.get("max_seq_length") or positions)
        require(
            length <= positions,
            "model_config",
            "max_seq_length",
            f"must be <= the model's max_position_embeddings={positions}",
            length,
        )
        options["max_seq_length"] = length
        tokenizer = tokenizer_from_files(checkpoint["tokenizer_files"], True, folder)
        architecture = (checkpoint["config"].get("architectures") or [""])[0]
        kinds = {
            "BertForTokenClassification": TaggerModel,
            "BertForQuestionAnswering": ReaderModel,
            "BertForMultipleChoice": ChoiceModel,
        }
        self.model = kinds.get(architecture, SentenceModel)(checkpoint, folder, tokenizer, options)

    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        frame = self.model.table(checked_input(model_input, self.model.inputs, self.limits))
        parts = []
        for group in self.model.groups(frame):
            for start in range(0, len(group), self.batch_size):
                rows = group.iloc[start : start + self.batch_size]
                parts.append(self.model.predict_rows(rows).set_index(rows.index))
        return pd.concat(parts).sort_index().reset_index(drop=True)


class SentenceModel:
    """A GLUE classifier (`label`, `score`; regression: `score`) or the pretrained encoder
    (`cls_embedding`, `mean_embedding`) on `text_a` and optionally `text_b`."""

    inputs = Schema([ColSpec("string", "text_a"), ColSpec("string", "text_b", required=False)])

    def __init__(self, checkpoint: dict, folder: str, tokenizer: Any, options: dict) -> None:
        from bert_pipeline.model import BertForSequenceClassification, BertModel
        from bert_pipeline.model.checkpoint import model_from_checkpoint

        config = checkpoint["config"]
        self.tokenizer, self.max_seq_length = tokenizer, options["max_seq_length"]
        self.classifier = "BertForSequenceClassification" in config.get("architectures", [])
        if self.classifier:
            self.model = model_from_checkpoint(
                checkpoint, BertForSequenceClassification, source=folder
            )
            id2label = config.get("id2label") or {}
            self.labels = [id2label.get(str(i), str(i)) for i in range(self.model.num_labels)]
        else:  # the encoder only: the pretraining heads are not used here
            checkpoint["state_dict"] = {
                k: v for k, v in checkpoint["state_dict"].items() if not k.startswith("cls.")
            }
            self.model = model_from_checkpoint(checkpoint, BertModel, source=folder)

    @staticmethod
    def table(frame: pd.DataFrame) -> pd.DataFrame:
        """`text_a` and `text_b`, None for a single sentence (absent, null or blank)."""
        out = frame[["text_a"]].copy()
        text_b = frame.get("text_b")
        out["text_b"] = None if text_b is None else text_b.mask(text_b.fillna("").str.strip() == "")
        return out

    @staticmethod
    def groups(frame: pd.DataFrame) -> list[pd.DataFrame]:
        # A batch is either all single sentences or all pairs (encode_table's rule).
        return [group for _, group in frame.groupby(frame["text_b"].isna(), sort=False)]

    @torch.no_grad()
    def predict_rows(self, rows: pd.DataFrame) -> pd.DataFrame:
        from bert_pipeline.glue.features import GlueFeatures, encode_table
        from bert_pipeline.model.bert import last_token, masked_mean

        features = GlueFeatures(
            encode_table(self.tokenizer, rows, self.max_seq_length), [0] * len(rows), False
        )
        batch = features.collate([features[i] for i in range(len(features))])
        inputs = (batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        if not self.classifier:
            hidden, _ = self.model(*inputs)
            mean = masked_mean(hidden, batch["attention_mask"])
            if self.model.config.is_decoder:  # [CLS] of a left-to-right encoder saw only itself
                last = last_token(hidden, batch["attention_mask"])
                return pd.DataFrame(
                    {"last_embedding": last.tolist(), "mean_embedding": mean.tolist()}
                )
            return pd.DataFrame(
                {"cls_embedding": hidden[:, 0].tolist(), "mean_embedding": mean.tolist()}
            )
        _, logits = self.model(*inputs)
        if len(self.labels) == 1:
            return pd.DataFrame({"score": logits.squeeze(-1).double().numpy()})
        probs = logits.double().softmax(-1)
        best = probs.argmax(-1)
        return pd.DataFrame(
            {
                "label": [self.labels[i] for i in best.tolist()],
                "score": probs.gather(1, best[:, None]).squeeze(1).numpy(),
            }
        )


class TaggerModel:
    """The NER tagger: `text_a`, words separated by spaces, to `tokens` (those words) and
    `tags` (one entity tag per word, read on its first sub-token as in training)."""

    inputs = Schema([ColSpec("string", "text_a")])

    def __init__(self, checkpoint: dict, folder: str, tokenizer: Any, options: dict) -> None:
        from bert_pipeline.model import BertForTokenClassification
        from bert_pipeline.model.checkpoint import model_from_checkpoint

        self.tokenizer, self.max_seq_length = tokenizer, options["max_seq_length"]
        self.model = model_from_checkpoint(checkpoint, BertForTokenClassification, source=folder)
        id2label = checkpoint["config"].get("id2label") or {}
        self.labels = [id2label.get(str(i), str(i)) for i in range(self.model.num_labels)]

    @staticmethod
    def table(frame: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame({"tokens": frame["text_a"].str.split()}, frame.index)

    @staticmethod
    def groups(frame: pd.DataFrame) -> list[pd.DataFrame]:
        return [frame]

    @torch.no_grad()
    def predict_rows(self, rows: pd.DataFrame) -> pd.DataFrame:
        from bert_pipeline.ner.features import encode_split, split_words

        # The words' labels are unknown here: every word gets the first label, unused.
        unlabelled = rows.assign(tags=rows["tokens"].map(lambda w: [self.labels[0]] * len(w)))
        unlabelled["doc"] = range(len(rows))
        features = encode_split(
            self.tokenizer, unlabelled, {self.labels[0]: 0}, self.max_seq_length, False
        )
        ids = []
        if len(features):
            batch = features.collate([features[i] for i in range(len(features))])
            _, logits = self.model(
                batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
            )
            ids = logits.argmax(-1)[batch["first"]].tolist()
        tags = split_words([self.labels[i] for i in ids], features.sentence_lengths)
        return pd.DataFrame({"tokens": list(rows["tokens"].map(list)), "tags": tags})


class ReaderModel:
    """The SQuAD reader: `question` and `context` to `answer` (the best span of the context
    within `max_answer_length` tokens) and `null_score_diff` (the no-answer score minus the
    span's: above the threshold a SQuAD 2.0 model would answer nothing). Its window and search
    settings are the training config's, logged with the model (`finetune_squad`'s
    READER_OPTIONS), so it answers as the dev evaluation did."""

    inputs = Schema([ColSpec("string", "question"), ColSpec("string", "context")])

    def __init__(self, checkpoint: dict, folder: str, tokenizer: Any, options: dict) -> None:
        from bert_pipeline.model import BertForQuestionAnswering
        from bert_pipeline.model.checkpoint import model_from_checkpoint

        self.tokenizer, self.options = tokenizer, options
        self.model = model_from_checkpoint(checkpoint, BertForQuestionAnswering, source=folder)

    @staticmethod
    def table(frame: pd.DataFrame) -> pd.DataFrame:
        return frame[["question", "context"]]

    @staticmethod
    def groups(frame: pd.DataFrame) -> list[pd.DataFrame]:
        return [frame]

    @torch.no_grad()
    def predict_rows(self, rows: pd.DataFrame) -> pd.DataFrame:
        from bert_pipeline.squad.evaluation import best_answers
        from bert_pipeline.squad.features import SquadFeatures, build_windows

        n, opts = len(rows), self.options
        questions = rows.reset_index(drop=True).assign(
            id=[str(i) for i in range(n)],
            answer_texts=[[] for _ in range(n)],
            answer_starts=[[] for _ in range(n)],
            is_impossible=True,
        )
        windows = build_windows(
            self.tokenizer,
            questions,
            opts["max_seq_length"],
            int(opts["doc_stride"]),
            int(opts["max_query_length"]),
        )
        batch = SquadFeatures(windows).collate(windows)
        _, start, end = self.model(
            batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
        )
        lengths = batch["lengths"].tolist()
        answers, null_diff = best_answers(
            questions,
            windows,
            [s[:k] for s, k in zip(start.numpy(), lengths, strict=True)],
            [e[:k] for e, k in zip(end.numpy(), lengths, strict=True)],
            int(opts["n_best_size"]),
            int(opts["max_answer_length"]),
        )
        ids = questions["id"]
        return pd.DataFrame(
            {"answer": ids.map(answers), "null_score_diff": ids.map(null_diff).astype(float)}
        )


class ChoiceModel:
    """The SWAG model: `context` (sentence A), `start` (the beginning of sentence B, may be
    blank) and the endings `ending0`..`ending3` to `label` (the most likely ending's index) and
    `score` (its softmax probability over the four), as the pipeline's dev pass scores them."""

    inputs = Schema(
        [
            ColSpec("string", "context"),
            ColSpec("string", "start", required=False),
            *(ColSpec("string", name) for name in ENDINGS),
        ]
    )

    def __init__(self, checkpoint: dict, folder: str, tokenizer: Any, options: dict) -> None:
        from bert_pipeline.model import BertForMultipleChoice
        from bert_pipeline.model.checkpoint import model_from_checkpoint

        self.tokenizer, self.max_seq_length = tokenizer, options["max_seq_length"]
        self.model = model_from_checkpoint(checkpoint, BertForMultipleChoice, source=folder)

    @staticmethod
    def table(frame: pd.DataFrame) -> pd.DataFrame:
        out = frame[["context", *ENDINGS]].copy()
        out["start"] = frame["start"].fillna("") if "start" in frame.columns else ""
        return out

    @staticmethod
    def groups(frame: pd.DataFrame) -> list[pd.DataFrame]:
        return [frame]

    @torch.no_grad()
    def predict_rows(self, rows: pd.DataFrame) -> pd.DataFrame:
        from bert_pipeline.swag.features import SwagFeatures, encode_choices

        encoded = encode_choices(self.tokenizer, rows, self.max_seq_length)
        features = SwagFeatures(encoded, [0] * len(rows))
        batch = features.collate([features[i] for i in range(len(features))])
        _, logits = self.model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        probs = logits.double().softmax(-1)
        best = probs.argmax(-1)
        return pd.DataFrame(
            {"label": best.numpy(), "score": probs.gather(1, best[:, None]).squeeze(1).numpy()}
        )


def checked_input(model_input: Any, inputs: Schema, limits: RequestLimits) -> pd.DataFrame:
    """The request as a table, or `BadRequest` naming its first problem: a missing column, no
    rows or too many, a text that is unusable (`_text_problem`)."""
    frame = pd.DataFrame(model_input)
    required, optional = inputs.required_input_names(), inputs.optional_input_names()
    if any(c not in frame.columns for c in required):
        also = f" and optionally {optional}" if optional else ""
        raise BadRequest(f"input has columns {list(frame.columns)}; expected {required}{also}")
    if len(frame) == 0:
        raise BadRequest(f"input has no rows; expected at least one row of {required}")
    if len(frame) > limits.max_rows:
        raise BadRequest(
            f"input has {len(frame)} rows; the model takes at most max_rows={limits.max_rows}"
        )
    for column in [*required, *(c for c in optional if c in frame.columns)]:
        for row, value in enumerate(frame[column]):
            if problem := _text_problem(value, column in optional, limits.max_text_chars):
                raise BadRequest(f"{column} of row {row} {problem}")
    return frame


def _text_problem(value: Any, optional: bool, max_chars: int) -> str | None:
    """Why `value` cannot be read as a text, or None. An optional text (`text_b`) may be null
    or blank: the row is a single sentence."""
    if not isinstance(value, str):
        if pd.api.types.is_scalar(value) and pd.isna(value):
            return None if optional else "is null; expected a non-empty string"
        return f"is {reprlib.repr(value)} ({type(value).__name__}); expected a string"
    if not value.strip():
        return None if optional else "is blank; expected a non-empty string"
    if len(value) > max_chars:
        return f"has {len(value)} characters; the model takes at most max_text_chars={max_chars}"
    return None


def requirements() -> list[str]:
    """The installed versions of what the pyfunc model imports (no slow inference by MLflow)."""
    return [f"{name}=={importlib.metadata.version(name)}" for name in REQUIREMENTS]


def log_bert_model(
    folder: str | Path,
    example: pd.DataFrame,
    *,
    name: str = ARTIFACT,
    registered_name: str | None = None,
    max_seq_length: int | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Logs the folder as the pyfunc LoggedModel `name` of the active run (and registers it
    when `registered_name` is given); `options` are the model's settings beside
    `max_seq_length` (None: the model's positions; a reader's doc_stride, ...) and the
    `RequestLimits` (their defaults otherwise).

    The signature comes from running the model on `example`, which is also stored as the input
    example. Returns the model URI, the LoggedModel id and the registered name/version, for
    the run's reports.
    """
    model_config = {"max_seq_length": max_seq_length, **asdict(RequestLimits()), **options}
    probe = BertPyfunc()
    probe.load_context(
        SimpleNamespace(artifacts={ARTIFACT: str(folder)}, model_config=model_config)
    )
    inputs = probe.model.inputs
    example = pd.DataFrame(example)
    if "text_b" in example.columns and (example["text_b"].fillna("").astype(str) == "").all():
        example = example.drop(columns="text_b")  # single sentences
    example = example[[c for c in inputs.input_names() if c in example.columns]]
    outputs = mlflow.models.infer_signature(example, probe.predict(None, example)).outputs
    package = Path(bert_pipeline.__file__).parent
    info = mlflow.pyfunc.log_model(
        name=name,
        python_model=str(package / "serving_entry.py"),  # models from code: nothing pickled
        artifacts={ARTIFACT: str(folder)},
        code_paths=[str(package)],
        pip_requirements=requirements(),
        signature=ModelSignature(inputs=inputs, outputs=outputs),
        input_example=example,
        model_config=model_config,
        registered_model_name=registered_name or None,
    )
    card = Path(folder) / MODEL_CARD_FILE
    if registered_name and card.is_file():  # the registry's version page shows the card
        mlflow.MlflowClient().update_model_version(
            registered_name, str(info.registered_model_version), description=card.read_text()
        )
    return {
        "model_uri": info.model_uri,
        "model_id": info.model_id,
        "registered_name": registered_name or None,
        "registered_version": info.registered_model_version,
    }


def log_checkpoint_model(checkpoint: dict, example: pd.DataFrame, **kwargs) -> dict[str, Any]:
    """`log_bert_model` for a checkpoint value (what Kedro nodes hold): written, then logged."""
    from bert_pipeline.model.checkpoint import write_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        folder = write_checkpoint(checkpoint, Path(tmp) / ARTIFACT)
        return log_bert_model(folder, example, **kwargs)
