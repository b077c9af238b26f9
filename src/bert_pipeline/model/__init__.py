"""BERT in plain PyTorch with Hugging Face-compatible weights (no Kedro, no transformers needed).

`from bert_pipeline.model import BertModel` loads torch; the names are resolved on first use
(PEP 562) so that `model.config` and `model.card`, which the run guard and the CLI read before
any training, can be imported without it.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "BertForMultipleChoice": "bert",
    "BertForPreTraining": "bert",
    "BertForQuestionAnswering": "bert",
    "BertForSequenceClassification": "bert",
    "BertForTokenClassification": "bert",
    "BertModel": "bert",
    "BertPreTrainingOutput": "bert",
    "hidden_states": "bert",
    "num_parameters": "bert",
    "PRESETS": "config",
    "BertConfig": "config",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
