"""Typed run settings, parsed once from the parameters with OmegaConf.

`parse_params` is the one way a parameters dict becomes a typed object, for pretraining and for
every fine-tuning task: OmegaConf resolves interpolations, converts types ("5e-5" -> 5e-05),
rejects unknown keys and names the full parameter path of any bad value; `check()` then tests
the ranges. The standalone launcher and the Kedro nodes both call it on the same YAML.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

PRECISIONS = ("32", "32-true", "bf16-mixed", "bf16-true", "16-mixed", "64", "64-true")
MASKING_MODES = ("auto", "static", "dynamic")

T = TypeVar("T")


class ConfigError(ValueError):
    """A parameter with an unusable value or an unknown name; the message names its path."""


TrainingConfigError = ConfigError  # the name pretraining code and its users know


def parse_params(schema: type[T], params: Mapping[str, Any] | None, root: str) -> T:
    """`params` as an instance of the dataclass `schema`; errors name `<root>.<path>`."""
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), OmegaConf.create(dict(params or {})))
        value = OmegaConf.to_object(merged)
    except OmegaConfBaseException as exc:
        key = f"{root}.{exc.full_key}" if getattr(exc, "full_key", None) else root
        reason = str(exc).splitlines()[0]
        raise ConfigError(f"parameter {key}: {reason}") from None
    check = getattr(value, "check", None)
    if check is not None:
        check(root)
    return value


def _require(ok: bool, root: str, name: str, message: str, value: Any) -> None:
    if not ok:
        raise ConfigError(f"parameter {root}.{name} must be {message}, got {value!r}")


@dataclass
class OptimizerParams:
    """AdamW as in BERT: decoupled weight decay (none on biases and LayerNorm), eps 1e-6."""

    lr: float = 1e-3
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-6

    def check(self, root: str) -> None:
        _require(self.lr > 0, root, "lr", "> 0", self.lr)
        _require(self.weight_decay >= 0, root, "weight_decay", ">= 0", self.weight_decay)
        _require(self.eps > 0, root, "eps", "> 0", self.eps)
        _require(all(0 <= b < 1 for b in self.betas), root, "betas", "in [0, 1)", self.betas)


@dataclass
class DeviceParams:
    """Where and how a Trainer runs: shared by pretraining and fine-tuning."""

    accelerator: str = "auto"
    devices: Any = 1  # int or "auto"
    num_nodes: int = 1
    strategy: str = "auto"
    precision: str = "32"
    deterministic: Any = "warn"  # true, false or "warn"
    gradient_clip_val: float = 1.0
    progress_bar: bool = True

    def check_devices(self, root: str) -> None:
        _require(
            self.precision in PRECISIONS, root, "precision", f"one of {PRECISIONS}", self.precision
        )
        _require(self.num_nodes > 0, root, "num_nodes", "> 0", self.num_nodes)
        _require(
            self.deterministic in (True, False, "warn"),
            root,
            "deterministic",
            "true, false or warn",
            self.deterministic,
        )
        _require(
            self.gradient_clip_val >= 0, root, "gradient_clip_val", ">= 0", self.gradient_clip_val
        )


# pretrain_data.examples settings the training needs: NSP or not, and dynamic masking's draw
EXAMPLE_SETTINGS = ("next_sentence", "masked_lm_prob", "max_predictions_per_seq")


@dataclass
class ModelParams:
    preset: str = "tiny"
    overrides: dict[str, Any] = field(default_factory=dict)
    init_from: str | None = None  # HF-format folder to continue pretraining from


@dataclass
class ScheduleParams:
    warmup_steps: int = 30
    max_steps: int = 300


@dataclass
class TrainingConfig(DeviceParams):
    """The `pretrain_model` parameters: everything a pretraining run needs besides its data."""

    model: ModelParams = field(default_factory=ModelParams)
    optimizer: OptimizerParams = field(default_factory=OptimizerParams)
    schedule: ScheduleParams = field(default_factory=ScheduleParams)
    batch_size: int = 32
    accumulate_grad_batches: int = 1
    seed: int = 42
    # Hidden and attention dropout while pretraining only (None: the model config's); the
    # exported config keeps the architecture's dropout, which fine-tuning then uses.
    dropout: float | None = None
    compile: bool = False  # torch.compile for training: fused element-wise kernels
    # data
    masking: str = "auto"
    # How the examples were made: the pipeline fills these from their manifest (for_examples)
    masked_lm_prob: float = 0.15
    max_predictions_per_seq: int = 20
    next_sentence: bool = True  # false: MLM loss only (the examples' B always continues A)
    pad_to_multiple_of: int = 8
    val_split: float = 0.1
    num_workers: int = 0
    # loop / logging
    val_every_n_steps: int = 50
    log_every_n_steps: int = 10
    checkpoint_every_n_steps: int = 100
    checkpoint_dir: str = "data/06_models/pretrain_checkpoints"
    resume: Any = False  # false, true or a .ckpt path

    ROOT = "pretrain_model"

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> TrainingConfig:
        return parse_params(cls, params, cls.ROOT)

    @classmethod
    def for_examples(
        cls, params: Mapping[str, Any] | None, examples, where: str = "pretraining_examples"
    ) -> TrainingConfig:
        """`pretrain_model` parameters completed by how `examples` (ExampleShards) were made.

        The parameters never restate the examples' settings, so the two cannot disagree.
        """
        restated = sorted(set(params or {}) & set(EXAMPLE_SETTINGS))
        if restated:
            raise ConfigError(
                f"parameter {cls.ROOT}.{restated[0]}: not a training parameter, it is read from "
                f"the examples' manifest; set pretrain_data.examples.{restated[0]} and rerun "
                "pretrain_data"
            )
        made = examples.made_with(*EXAMPLE_SETTINGS, where=where)
        return cls.from_params({**(params or {}), **made})

    def check(self, root: str = ROOT) -> None:
        self.check_devices(root)
        self.optimizer.check(f"{root}.optimizer")
        for name in (
            "batch_size",
            "accumulate_grad_batches",
            "val_every_n_steps",
            "log_every_n_steps",
            "checkpoint_every_n_steps",
        ):
            _require(getattr(self, name) > 0, root, name, "> 0", getattr(self, name))
        steps = self.schedule
        _require(steps.max_steps > 0, root, "schedule.max_steps", "> 0", steps.max_steps)
        _require(
            0 <= steps.warmup_steps <= steps.max_steps,
            root,
            "schedule.warmup_steps",
            f"in [0, max_steps={steps.max_steps}]",
            steps.warmup_steps,
        )
        _require(
            self.dropout is None or 0 <= self.dropout < 1,
            root,
            "dropout",
            "in [0, 1) or null",
            self.dropout,
        )
        _require(
            self.masking in MASKING_MODES, root, "masking", f"one of {MASKING_MODES}", self.masking
        )
        _require(
            0 < self.val_split < 1 or (float(self.val_split).is_integer() and self.val_split >= 1),
            root,
            "val_split",
            "a fraction in (0, 1) or a whole number of held-out examples >= 1",
            self.val_split,
        )
        _require(self.num_workers >= 0, root, "num_workers", ">= 0", self.num_workers)
