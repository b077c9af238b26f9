"""Kedro dataset for Hugging Face-format BERT checkpoint folders.

In memory a checkpoint is a plain, picklable dict (no model object, no Kedro, no transformers)::

    {
        "config": dict,                        # config.json: BertConfig.to_dict() + architectures
        "state_dict": dict[str, torch.Tensor], # HF weight names; tied decoder copies left out
        "tokenizer_files": dict[str, bytes],   # {"vocab.txt": b"...", "tokenizer.json": b"..."}
    }

Build one with ``bert_pipeline.model.checkpoint.model_to_checkpoint(model, tokenizer_files)``
and turn it back into a model with
``model_from_checkpoint(value, BertForSequenceClassification, num_labels=3)``.
On disk it is a folder ``config.json`` + ``model.safetensors`` (+ tokenizer files) that
``transformers.BertForPreTraining.from_pretrained`` reads; saves are atomic (temp folder,
then rename).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from kedro.io.core import AbstractDataset, DatasetError

from bert_pipeline.model.config import CONFIG_FILE

if TYPE_CHECKING:
    from bert_pipeline.model.checkpoint import Checkpoint

# bert_pipeline.model.checkpoint (torch) is imported by load and save only: kedro-mlflow builds
# every catalog entry at the start of each run, a data run included, which never needs torch


class CheckpointDataset(AbstractDataset[dict, dict]):
    """A BERT checkpoint folder on the local filesystem.

    Example catalog entry::

        pretrained_model:
          type: bert_pipeline.io.checkpoint_dataset.CheckpointDataset
          path: data/06_models/bert_pretrained
    """

    def __init__(self, path: str, metadata: dict[str, Any] | None = None):
        self._path = Path(path)
        self.metadata = metadata

    def load(self) -> Checkpoint:
        """The folder's checkpoint; its config names the folder (`_name_or_path`, as
        transformers' from_pretrained does), so errors, model cards and lineage can name it."""
        from bert_pipeline.model.checkpoint import read_checkpoint

        checkpoint = read_checkpoint(self._path)
        checkpoint["config"]["_name_or_path"] = str(self._path)
        return checkpoint

    def save(self, data: Checkpoint) -> None:
        missing = {"config", "state_dict"} - set(data)
        if missing:
            raise DatasetError(
                f"checkpoint to save at {self._path} lacks {sorted(missing)}; expected a dict with "
                "'config', 'state_dict' and optionally 'tokenizer_files' "
                "(see bert_pipeline.model.checkpoint.model_to_checkpoint)"
            )
        from bert_pipeline.model.checkpoint import write_checkpoint

        write_checkpoint(data, self._path)

    def _exists(self) -> bool:
        return (self._path / CONFIG_FILE).is_file()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(PurePosixPath(self._path))}
