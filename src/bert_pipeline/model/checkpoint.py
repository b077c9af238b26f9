"""Hugging Face-format checkpoint folders: config.json + model.safetensors (+ tokenizer files).

Two layers:

* a framework-free *checkpoint value* ``{"config": dict, "state_dict": dict[str, Tensor],
  "tokenizer_files": dict[str, bytes]}`` with ``read_checkpoint`` / ``write_checkpoint``
  (what the Kedro ``CheckpointDataset`` moves between nodes), and
* model conversion with ``model_to_checkpoint`` / ``model_from_checkpoint`` and the
  shortcuts ``save_pretrained`` / ``load_pretrained``.

A task starts from a checkpoint with `tokenizer_from_checkpoint`, `check_checkpoint` (weights,
config.json and tokenizer agree) and `with_new_head` / `encoder_only`.

Loading accepts our folders and HF ones: ``model.safetensors`` or ``pytorch_model.bin``
(``torch.load(weights_only=True)``), ``BertModel``-only weights with or without the ``bert.``
prefix, and old TF-converted names (``LayerNorm.gamma``/``beta``). Missing weights are freshly
initialised and, with unexpected ones, logged and returned; a shape mismatch is an error.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from torch import nn

from bert_pipeline.data.tokenizer import (
    SPECIAL_TOKENS_MAP_FILE,
    TOKENIZER_CONFIG_FILE,
    TOKENIZER_FILE,
    VOCAB_FILE,
    tokenizer_files,
    tokenizer_from_files,
    transformers_files,
)
from bert_pipeline.fsutil import atomic_directory
from bert_pipeline.model.bert import (
    BertForMultipleChoice,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
)
from bert_pipeline.model.config import CONFIG_FILE, BertConfig

logger = logging.getLogger(__name__)

CLASSIFIERS = (BertForSequenceClassification, BertForTokenClassification)

SAFETENSORS_FILE = "model.safetensors"
PYTORCH_FILE = "pytorch_model.bin"
MODEL_CARD_FILE = "README.md"
TOKENIZER_FILES = (TOKENIZER_FILE, VOCAB_FILE, TOKENIZER_CONFIG_FILE, SPECIAL_TOKENS_MAP_FILE)
# Tied copies of other tensors: not written (safetensors refuses shared storage), re-tied on load.
TIED_KEYS = {
    "cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
    "cls.predictions.decoder.bias": "cls.predictions.bias",
}
_ENCODER_ROOTS = ("embeddings.", "encoder.", "pooler.")

WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"

# {"config": dict, "state_dict": dict[str, Tensor], "tokenizer_files": dict[str, bytes]}, and
# optionally "model_card": str (README.md)
Checkpoint = dict[str, Any]


class CheckpointMismatchError(ValueError):
    """The checkpoint, its config.json and the tokenizer disagree."""


def unreadable(path: str | Path, exc: Exception, what: str = "weights file") -> str:
    """The one message for a damaged weights or checkpoint file (torch and safetensors raise
    many error types): the file and the first line of the reason."""
    reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
    return f"{path} is not a readable {what} ({reason})"


@dataclass
class LoadingInfo:
    """What did not line up between a checkpoint and the model it was loaded into."""

    missing_keys: list[str] = field(default_factory=list)  # freshly initialised
    unexpected_keys: list[str] = field(default_factory=list)  # ignored
    renamed_keys: dict[str, str] = field(default_factory=dict)  # checkpoint name -> model name


# ---------------------------------------------------------------------------- folder <-> value


def read_checkpoint(directory: str | Path) -> Checkpoint:
    """Read a checkpoint folder (ours or HF's) into the framework-free checkpoint value."""
    directory = Path(directory)
    config_path = directory / CONFIG_FILE
    if not config_path.is_file():
        raise FileNotFoundError(f"no {CONFIG_FILE} in checkpoint folder {directory}")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    if (directory / SAFETENSORS_FILE).is_file():
        weights = directory / SAFETENSORS_FILE
        load = load_file
    elif (directory / PYTORCH_FILE).is_file():
        weights = directory / PYTORCH_FILE
        load = partial(torch.load, map_location="cpu", weights_only=True)  # never unpickle code
    else:
        raise FileNotFoundError(
            f"no {SAFETENSORS_FILE} or {PYTORCH_FILE} in checkpoint folder {directory}"
        )
    try:
        state_dict = load(weights)
    except Exception as exc:  # safetensors and torch raise many types for a damaged file
        raise ValueError(unreadable(weights, exc)) from None
    tokenizer_files = {
        name: (directory / name).read_bytes()
        for name in TOKENIZER_FILES
        if (directory / name).is_file()
    }
    checkpoint = {"config": config, "state_dict": state_dict, "tokenizer_files": tokenizer_files}
    if (directory / MODEL_CARD_FILE).is_file():
        checkpoint["model_card"] = (directory / MODEL_CARD_FILE).read_text(encoding="utf-8")
    return checkpoint


def check_weights(directory: str | Path) -> None:
    """Reads only the header of a folder's model.safetensors: a damaged file fails here, at once,
    not when a node loads it after others have run."""
    from safetensors import safe_open

    weights = Path(directory) / SAFETENSORS_FILE
    if not weights.is_file():
        return
    try:
        with safe_open(weights, framework="pt") as f:
            f.keys()
    except Exception as exc:  # safetensors raises its own error types
        raise ValueError(unreadable(weights, exc)) from None


def write_checkpoint(checkpoint: Checkpoint, directory: str | Path) -> Path:
    """Write a checkpoint value as a folder, atomically (a sibling temp folder renamed in place)."""
    directory = Path(directory)
    if directory.is_dir():  # replaced as a whole: never take unrelated files with it
        known = {CONFIG_FILE, SAFETENSORS_FILE, PYTORCH_FILE, MODEL_CARD_FILE, *TOKENIZER_FILES}
        others = sorted(p.name for p in directory.iterdir() if p.name not in known)
        if others:
            raise FileExistsError(
                f"{directory} exists and holds files that are not part of a checkpoint "
                f"({', '.join(others[:5])}); refusing to replace it"
            )
    with atomic_directory(directory) as tmp:
        (tmp / CONFIG_FILE).write_text(
            json.dumps(checkpoint["config"], indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
        tensors = {k: v.detach().cpu().contiguous() for k, v in checkpoint["state_dict"].items()}
        save_file(tensors, tmp / SAFETENSORS_FILE, metadata={"format": "pt"})
        for name, data in (checkpoint.get("tokenizer_files") or {}).items():
            if Path(name).name != name:
                raise ValueError(f"tokenizer file name {name!r} must be a plain file name")
            (tmp / name).write_bytes(data)
        if checkpoint.get("model_card"):
            (tmp / MODEL_CARD_FILE).write_text(checkpoint["model_card"], encoding="utf-8")
    return directory


TokenizerSource = Tokenizer | str | Path | Iterable[str | Path] | Mapping[str, bytes]


def tokenizer_files_from(source: TokenizerSource) -> dict:
    """Tokenizer files as {name: bytes} from a Tokenizer, a folder, a list of files or a mapping."""
    if isinstance(source, Tokenizer):
        return tokenizer_files(source)
    if isinstance(source, Mapping):
        return {str(k): bytes(v) for k, v in source.items()}
    if isinstance(source, str | Path):
        folder = Path(source)
        if not folder.is_dir():
            raise FileNotFoundError(f"tokenizer folder {folder} does not exist")
        files = {n: (folder / n).read_bytes() for n in TOKENIZER_FILES if (folder / n).is_file()}
        if not files:
            raise FileNotFoundError(f"no tokenizer file ({', '.join(TOKENIZER_FILES)}) in {folder}")
        return files
    return {Path(p).name: Path(p).read_bytes() for p in source}


# ---------------------------------------------------------------------------- model <-> value


def _architecture(model: nn.Module) -> str:
    heads = (BertForMultipleChoice, BertForQuestionAnswering)
    for cls in (BertForPreTraining, *CLASSIFIERS, *heads, BertModel):
        if isinstance(model, cls):
            return cls.__name__
    raise TypeError(f"cannot export a {type(model).__name__}; expected one of our BERT models")


def model_to_checkpoint(
    model: nn.Module,
    tokenizer: TokenizerSource | None = None,
    *,
    labels: Sequence[str] | None = None,
    finetuning_task: str | None = None,
) -> Checkpoint:
    """The one export: HF-loadable checkpoint value of a model, with its tokenizer files.

    Tied copies are dropped and tensors moved to CPU; a classifier gets `id2label`/`label2id`
    from `labels` (HF's LABEL_i names without), and `finetuning_task` is recorded as HF does.
    With a tokenizer.json (whose normalizer says whether it lowercases), transformers'
    tokenizer_config.json and special_tokens_map.json are written too, fresh: a vocab.txt alone
    cannot tell its lowercasing, so it travels as given.
    """
    config = model.config.to_dict()
    config["architectures"] = [_architecture(model)]
    if isinstance(model, CLASSIFIERS):
        names = list(labels) if labels else [f"LABEL_{i}" for i in range(model.num_labels)]
        if len(names) != model.num_labels:
            raise ValueError(f"{len(names)} label names for a {model.num_labels}-way classifier")
        config["id2label"] = {str(i): name for i, name in enumerate(names)}
        config["label2id"] = {name: i for i, name in enumerate(names)}
    if finetuning_task:
        config["finetuning_task"] = finetuning_task
    state_dict = {
        k: v.detach().cpu().clone() for k, v in model.state_dict().items() if k not in TIED_KEYS
    }
    files = tokenizer_files_from(tokenizer) if tokenizer is not None else {}
    if TOKENIZER_FILE in files:
        tok = tokenizer if isinstance(tokenizer, Tokenizer) else tokenizer_from_files(files)
        files |= transformers_files(tok, config["max_position_embeddings"])
    return {"config": config, "state_dict": state_dict, "tokenizer_files": files}


def random_like(checkpoint: Mapping, seed: int) -> Checkpoint:
    """A random init of `checkpoint`'s architecture, drawn from `seed` alone (torch's global
    generator is left as it was), with its tokenizer files: the baseline that shows what
    pretraining bought."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = BertForPreTraining(BertConfig.from_dict(checkpoint["config"]))
    return model_to_checkpoint(model, checkpoint.get("tokenizer_files") or None)


def _normalise_keys(
    state_dict: Mapping[str, torch.Tensor], expects_prefix: bool
) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Map checkpoint names onto ours: TF LayerNorm names, ``bert.`` prefix, buffers."""
    has_prefix = any(k.startswith("bert.") for k in state_dict)
    out, renamed = {}, {}
    for key, tensor in state_dict.items():
        new = key.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
            "LayerNorm.beta", "LayerNorm.bias"
        )
        if new.endswith("position_ids") or new.endswith("embeddings.token_type_ids"):
            continue  # HF buffers, not weights
        if expects_prefix and not has_prefix and new.startswith(_ENCODER_ROOTS):
            new = "bert." + new
        elif not expects_prefix and new.startswith("bert."):
            new = new[len("bert.") :]
        if new != key:
            renamed[key] = new
        out[new] = tensor
    return out, renamed


def _has_pooler(model: nn.Module) -> bool:
    encoder = model if isinstance(model, BertModel) else getattr(model, "bert", None)
    return getattr(encoder, "pooler", None) is not None


def model_from_checkpoint(
    checkpoint: Checkpoint,
    model_cls: type[nn.Module] = BertForPreTraining,
    *,
    output_loading_info: bool = False,
    source: str = "checkpoint",
    **overrides: Any,
):
    """Build ``model_cls`` from a checkpoint value; ``overrides`` change config fields (dropout...).

    For a classifier (sequence or token) pass ``num_labels`` (default: from ``id2label`` in the
    config, else 2). Returns the model in eval mode, or ``(model, LoadingInfo)`` with
    ``output_loading_info``.
    """
    kwargs = {}
    if model_cls in CLASSIFIERS:
        id2label = checkpoint["config"].get("id2label")
        kwargs["num_labels"] = overrides.pop("num_labels", len(id2label) if id2label else 2)
    unknown = set(overrides) - {f.name for f in dataclasses.fields(BertConfig)}
    if unknown:
        raise TypeError(f"unknown BertConfig field(s) to override: {sorted(unknown)}")
    config = BertConfig.from_dict({**checkpoint["config"], **overrides})
    model = model_cls(config, **kwargs)

    expected = model.state_dict()
    state_dict, renamed = _normalise_keys(
        checkpoint["state_dict"], expects_prefix=model_cls is not BertModel
    )
    for tied in TIED_KEYS:  # a tied copy only counts if its source is absent
        if tied in state_dict and TIED_KEYS[tied] in state_dict:
            del state_dict[tied]
    for key, tensor in state_dict.items():
        if key in expected and expected[key].shape != tensor.shape:
            raise ValueError(
                f"{source}: weight {key!r} has shape {tuple(tensor.shape)} in the checkpoint but "
                f"{tuple(expected[key].shape)} in {model_cls.__name__}"
            )
    result = model.load_state_dict(state_dict, strict=False)
    info = LoadingInfo(  # a tied copy is reported under its source's name, if at all
        missing_keys=[k for k in result.missing_keys if k not in TIED_KEYS],
        unexpected_keys=[  # a pooler is expected to go unused by a model without one (HF too)
            k for k in result.unexpected_keys if not ("pooler." in k and not _has_pooler(model))
        ],
        renamed_keys=renamed,
    )
    if info.missing_keys:
        logger.warning(
            "%s: %d weights not in the checkpoint, freshly initialised: %s",
            source,
            len(info.missing_keys),
            ", ".join(info.missing_keys),
        )
    if info.unexpected_keys:
        logger.warning(
            "%s: %d checkpoint weights unused by %s: %s",
            source,
            len(info.unexpected_keys),
            model_cls.__name__,
            ", ".join(info.unexpected_keys),
        )
    model.eval()  # as HF's from_pretrained; call .train() to fine-tune
    return (model, info) if output_loading_info else model


# ---------------------------------------------------------------------------- shortcuts


def save_pretrained(
    model: nn.Module, directory: str | Path, tokenizer: TokenizerSource | None = None
) -> Path:
    """Write ``model`` as an HF checkpoint folder, with the tokenizer files if given."""
    return write_checkpoint(model_to_checkpoint(model, tokenizer), directory)


def load_pretrained(
    directory: str | Path,
    model_cls: type[nn.Module] = BertForPreTraining,
    *,
    output_loading_info: bool = False,
    **overrides: Any,
):
    """Load an BERT folder (ours or HF's) into ``model_cls`` (see model_from_checkpoint)."""
    return model_from_checkpoint(
        read_checkpoint(directory),
        model_cls,
        output_loading_info=output_loading_info,
        source=str(directory),
        **overrides,
    )


# ---------------------------------------------------------------------------- a task's start


def checkpoint_source(checkpoint: Mapping, dataset: str, parameter: str) -> str:
    """How errors name a checkpoint: its folder, else the catalog entry and runtime parameter."""
    folder = checkpoint.get("config", {}).get("_name_or_path")
    return str(folder or f"the checkpoint {dataset} (runtime parameter {parameter})")


def tokenizer_from_checkpoint(checkpoint: Mapping, source: str, lowercase: bool) -> Tokenizer:
    """The tokenizer stored in a checkpoint's folder (tokenizer.json, else vocab.txt)."""
    files = checkpoint.get("tokenizer_files") or {}
    if not files:
        raise CheckpointMismatchError(
            f"{source}: no tokenizer.json or vocab.txt beside the weights; export the model with "
            "its tokenizer files"
        )
    return tokenizer_from_files(files, lowercase, source)


def check_checkpoint(
    checkpoint: Mapping, tokenizer: Tokenizer, source: str, max_seq_length: int | None = None
) -> None:
    """Fails early, naming the parameter, when weights, config.json and tokenizer disagree."""
    config = checkpoint["config"]
    for key in ("vocab_size", "hidden_size"):
        if key not in config:
            raise CheckpointMismatchError(f"{source}: config.json has no {key!r}")
    embedding = next(
        (v for k, v in checkpoint["state_dict"].items() if k.endswith(WORD_EMBEDDINGS)), None
    )
    if embedding is None:
        raise CheckpointMismatchError(f"{source}: the weights have no {WORD_EMBEDDINGS}")
    expected = (config["vocab_size"], config["hidden_size"])
    if tuple(embedding.shape) != expected:
        raise CheckpointMismatchError(
            f"{source}: {WORD_EMBEDDINGS} has shape {tuple(embedding.shape)} but config.json says "
            f"vocab_size={expected[0]}, hidden_size={expected[1]}"
        )
    if tokenizer.get_vocab_size() > config["vocab_size"]:  # a padded embedding table is fine
        raise CheckpointMismatchError(
            f"{source}: the tokenizer has {tokenizer.get_vocab_size()} tokens but config.json "
            f"vocab_size={config['vocab_size']}"
        )
    max_positions = config.get("max_position_embeddings", 512)
    if max_seq_length is not None and max_seq_length > max_positions:
        raise ValueError(
            f"max_seq_length={max_seq_length} exceeds the model's "
            f"max_position_embeddings={max_positions} ({source})"
        )


def encoder_only(checkpoint: Mapping) -> dict:
    """The checkpoint without its heads (pretraining `cls.*`, a task's head), labels and
    what the old head read: what a new task starts from, so their absence is expected, not
    warned about."""
    heads = ("cls.", "classifier.", "qa_outputs.", "head_lstm.")
    return {
        **checkpoint,
        "state_dict": {
            k: v for k, v in checkpoint["state_dict"].items() if not k.startswith(heads)
        },
        "config": {
            k: v
            for k, v in checkpoint["config"].items()
            if k not in ("id2label", "label2id", "classifier_pooling", "head_lstm_size")
        },
    }


def with_new_head(
    checkpoint: Mapping,
    model_cls: type[nn.Module],
    num_labels: int | None,
    source: str,
    seed: int | None,
    head: str = "classifier",
    **overrides: Any,
) -> nn.Module:
    """The encoder from the checkpoint plus a fresh linear `head` (any old head is dropped);
    `num_labels` for a classifier, None for a model with a fixed head (question answering);
    `overrides` set config fields of the new model (`classifier_pooling`, `head_lstm_size`).

    With a seed, the head's N(0, initializer_range) weights come from that seed alone (not from
    whatever the encoder's init drew first), as transformers initializes a missing head after
    `set_seed(seed)`: the same seed gives the same head on both sides.
    """
    stripped = encoder_only(checkpoint)
    config = stripped["config"]
    try:
        labels = {} if num_labels is None else {"num_labels": num_labels}
        model = model_from_checkpoint(stripped, model_cls, source=source, **labels, **overrides)
    except ValueError as exc:
        message = str(exc)
        raise CheckpointMismatchError(
            message if message.startswith(source) else f"{source}: {message}"
        ) from exc
    if seed is not None:
        generator = torch.Generator().manual_seed(seed)
        std = config.get("initializer_range", 0.02)
        with torch.no_grad():
            getattr(model, head).weight.normal_(0.0, std, generator=generator)
            getattr(model, head).bias.zero_()
            lstm = getattr(model, "head_lstm", None)
            if lstm is not None:  # torch's own LSTM init, drawn from the seed after the head
                bound = lstm.lstm.hidden_size**-0.5
                for weight in lstm.parameters():
                    weight.uniform_(-bound, bound, generator=generator)
    return model.train()  # Lightning keeps module modes: dropout must be on for fine-tuning
