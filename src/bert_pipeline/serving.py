"""BERT folders as MLflow pyfunc models: logged with the project's code, registered, served.

`log_bert_model` is how pretraining and every GLUE task put a model into MLflow (called through
`bert_pipeline.tracking.log_model`): a LoggedModel of the active run holding the HF-format
folder (weights, config, tokenizer, model card), this package as `code_paths` and pinned
requirements, so that `mlflow.pyfunc.load_model("models:/<name>/<version>")` needs nothing from the
project checkout.

Input: a table with `text_a` and optionally `text_b` (sentence pairs; empty for single sentences).
Output of a fine-tuned classifier: `label` (the label name) and `score` (its softmax probability);
of a regression task (STS-B): `score`; of the pretrained encoder: `cls_embedding` (the last
layer's [CLS] vector) and `mean_embedding` (the mean over the tokens), lists of floats.
"""

from __future__ import annotations

import importlib.metadata
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import mlflow
import pandas as pd
import torch
from mlflow.models import ModelSignature
from mlflow.types.schema import ColSpec, Schema

import bert_pipeline
from bert_pipeline.model.checkpoint import MODEL_CARD_FILE

ARTIFACT = "model"
REQUIREMENTS = ("torch", "tokenizers", "safetensors", "pandas", "numpy", "mlflow")


class BertPyfunc(mlflow.pyfunc.PythonModel):
    """Classifies (or embeds) sentences and sentence pairs with an exported BERT folder."""

    def load_context(self, context) -> None:
        from bert_pipeline.data.tokenizer import tokenizer_from_files
        from bert_pipeline.model import BertForSequenceClassification, BertModel
        from bert_pipeline.model.checkpoint import model_from_checkpoint, read_checkpoint

        folder = context.artifacts[ARTIFACT]
        checkpoint = read_checkpoint(folder)
        config = checkpoint["config"]
        self.max_seq_length = int((context.model_config or {}).get("max_seq_length", 128))
        self.batch_size = int((context.model_config or {}).get("batch_size", 32))
        self.tokenizer = tokenizer_from_files(checkpoint["tokenizer_files"], True, folder)
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

    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        frame = _as_pairs(model_input)
        parts = []
        # A batch is either all single sentences or all pairs (encode_table's rule).
        for _, group in frame.groupby(frame["text_b"].isna(), sort=False):
            for start in range(0, len(group), self.batch_size):
                rows = group.iloc[start : start + self.batch_size]
                parts.append(self._predict_rows(rows).set_index(rows.index))
        return pd.concat(parts).sort_index().reset_index(drop=True)

    @torch.no_grad()
    def _predict_rows(self, rows: pd.DataFrame) -> pd.DataFrame:
        from bert_pipeline.glue.features import GlueFeatures, encode_table
        from bert_pipeline.model.bert import masked_mean

        features = GlueFeatures(
            encode_table(self.tokenizer, rows, self.max_seq_length), [0] * len(rows), False
        )
        batch = features.collate([features[i] for i in range(len(features))])
        inputs = (batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        if not self.classifier:
            hidden, _ = self.model(*inputs)
            mean = masked_mean(hidden, batch["attention_mask"])
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


def _as_pairs(model_input: pd.DataFrame) -> pd.DataFrame:
    """`text_a` (required) and `text_b` (None for single sentences) as a fresh table."""
    frame = pd.DataFrame(model_input)
    if "text_a" not in frame.columns:
        raise ValueError(
            f"input has columns {list(frame.columns)}; expected text_a and optionally text_b"
        )
    text_b = frame["text_b"] if "text_b" in frame.columns else None
    out = pd.DataFrame({"text_a": frame["text_a"].astype(str)}, index=frame.index)
    out["text_b"] = None if text_b is None else text_b.where(text_b.notna() & (text_b != ""))
    return out


def requirements() -> list[str]:
    """The installed versions of what the pyfunc model imports (no slow inference by MLflow)."""
    return [f"{name}=={importlib.metadata.version(name)}" for name in REQUIREMENTS]


def log_bert_model(
    folder: str | Path,
    example: pd.DataFrame,
    *,
    registered_name: str | None = None,
    max_seq_length: int = 128,
) -> dict[str, Any]:
    """Logs the folder as a pyfunc model of the active run (and registers it when named).

    The signature comes from running the model on `example` (its `text_a`/`text_b` rows), which
    is also stored as the input example. Returns the model URI, the LoggedModel id and the
    registered name/version, for the run's reports.
    """
    model_config = {"max_seq_length": max_seq_length}
    example = _as_pairs(example)
    if example["text_b"].isna().all():
        example = example[["text_a"]]
    probe = BertPyfunc()
    probe.load_context(
        SimpleNamespace(artifacts={ARTIFACT: str(folder)}, model_config=model_config)
    )
    outputs = mlflow.models.infer_signature(example, probe.predict(None, example)).outputs
    inputs = Schema([ColSpec("string", "text_a"), ColSpec("string", "text_b", required=False)])
    package = Path(bert_pipeline.__file__).parent
    info = mlflow.pyfunc.log_model(
        name=ARTIFACT,
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
