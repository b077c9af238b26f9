"""Training settings as one validated dataclass, built from the `pretrain_model` parameters.

The same dataclass travels as JSON to the distributed entry point (`bert_pipeline.training.launch`),
so a run launched by Kedro and one launched by hand with torchrun/SLURM see identical settings.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any

PRECISIONS = ("32", "32-true", "bf16-mixed", "bf16-true", "16-mixed", "64", "64-true")
MASKING_MODES = ("auto", "static", "dynamic")


class TrainingConfigError(ValueError):
    """A `pretrain_model` parameter with an unusable value; the message names the parameter."""


def _unknown(prefix: str, keys) -> str:
    names = ", ".join(f"pretrain_model.{prefix}{k}" for k in sorted(keys))
    return f"unknown parameter(s): {names}"


@dataclass
class TrainingConfig:
    """Everything the Lightning run needs besides the examples and the tokenizer."""

    # model
    model_preset: str = "tiny"
    model_overrides: dict[str, Any] = field(default_factory=dict)
    init_from: str | None = None  # HF-format folder to continue pretraining from
    # optimisation
    lr: float = 1e-3
    weight_decay: float = 0.01
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-6
    warmup_steps: int = 30
    max_steps: int = 300
    batch_size: int = 32
    accumulate_grad_batches: int = 1
    gradient_clip_val: float = 1.0
    precision: str = "32"
    seed: int = 42
    deterministic: bool | str = "warn"
    # data
    masking: str = "auto"
    masked_lm_prob: float = 0.15
    max_predictions_per_seq: int = 20
    pad_to_multiple_of: int = 8
    val_split: float = 0.1
    num_workers: int = 0
    # loop / logging
    val_every_n_steps: int = 50
    log_every_n_steps: int = 10
    checkpoint_every_n_steps: int = 100
    checkpoint_dir: str = "data/06_models/pretrain_checkpoints"
    resume: bool | str = False
    progress_bar: bool = True
    # devices
    accelerator: str = "auto"
    devices: int | str = 1
    num_nodes: int = 1
    strategy: str = "auto"

    def __post_init__(self) -> None:
        self.precision = str(self.precision)
        self.adam_betas = tuple(float(b) for b in self.adam_betas)
        positive = {
            "optimizer.lr": self.lr,
            "schedule.max_steps": self.max_steps,
            "batch_size": self.batch_size,
            "accumulate_grad_batches": self.accumulate_grad_batches,
            "val_every_n_steps": self.val_every_n_steps,
            "log_every_n_steps": self.log_every_n_steps,
            "checkpoint_every_n_steps": self.checkpoint_every_n_steps,
            "num_nodes": self.num_nodes,
        }
        for name, value in positive.items():
            if not value > 0:
                raise TrainingConfigError(
                    f"parameter pretrain_model.{name} must be > 0, got {value}"
                )
        if not 0 <= self.warmup_steps <= self.max_steps:
            raise TrainingConfigError(
                f"parameter pretrain_model.schedule.warmup_steps={self.warmup_steps} must be in "
                f"[0, max_steps={self.max_steps}]"
            )
        if self.weight_decay < 0:
            raise TrainingConfigError(
                "parameter pretrain_model.optimizer.weight_decay must be >= 0, "
                f"got {self.weight_decay}"
            )
        if self.gradient_clip_val is not None and self.gradient_clip_val < 0:
            raise TrainingConfigError(
                "parameter pretrain_model.gradient_clip_val must be >= 0, "
                f"got {self.gradient_clip_val}"
            )
        if self.precision not in PRECISIONS:
            raise TrainingConfigError(
                f"parameter pretrain_model.precision={self.precision!r} is not one of {PRECISIONS}"
            )
        if self.masking not in MASKING_MODES:
            raise TrainingConfigError(
                f"parameter pretrain_model.masking={self.masking!r} is not one of {MASKING_MODES}"
            )
        if not (
            0 < self.val_split < 1 or (float(self.val_split).is_integer() and self.val_split >= 1)
        ):
            raise TrainingConfigError(
                "parameter pretrain_model.val_split must be a fraction in (0, 1) or a whole number "
                f"of held-out examples >= 1, got {self.val_split}"
            )
        if self.deterministic not in (True, False, "warn"):
            raise TrainingConfigError(
                "parameter pretrain_model.deterministic must be true, false or warn, "
                f"got {self.deterministic!r}"
            )
        if self.num_workers < 0:
            raise TrainingConfigError(
                f"parameter pretrain_model.num_workers must be >= 0, got {self.num_workers}"
            )

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> TrainingConfig:
        """Builds the config from the nested `pretrain_model` parameters dict."""
        params = copy.deepcopy(dict(params))  # the caller's dict is passed on to launch as is
        flat: dict[str, Any] = {}
        model = params.pop("model", {}) or {}
        unknown_model = set(model) - {"preset", "overrides", "init_from"}
        if unknown_model:
            raise TrainingConfigError(_unknown("model.", unknown_model))
        flat["model_preset"] = model.get("preset", cls.model_preset)
        flat["model_overrides"] = dict(model.get("overrides") or {})
        flat["init_from"] = model.get("init_from")
        optimizer = params.pop("optimizer", {}) or {}
        for key, target in (
            ("lr", "lr"),
            ("weight_decay", "weight_decay"),
            ("betas", "adam_betas"),
            ("eps", "adam_eps"),
        ):
            if key in optimizer:
                flat[target] = optimizer.pop(key)
        if optimizer:
            raise TrainingConfigError(_unknown("optimizer.", optimizer))
        schedule = params.pop("schedule", {}) or {}
        for key in ("warmup_steps", "max_steps"):
            if key in schedule:
                flat[key] = schedule.pop(key)
        if schedule:
            raise TrainingConfigError(_unknown("schedule.", schedule))
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(params) - names
        if unknown:
            raise TrainingConfigError(_unknown("", unknown))
        flat.update(params)
        return cls(**flat)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["adam_betas"] = list(self.adam_betas)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainingConfig:
        return cls(**data)
