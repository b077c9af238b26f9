"""Typed run settings of pretraining and fine-tuning, parsed with `bert_pipeline.params`.

The standalone launcher and the Kedro nodes both parse the same YAML with `parse_params`;
`check()` tests the ranges.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bert_pipeline.data.masking import EXAMPLE_MASKING, MASKED_LM_PROB, MAX_PREDICTIONS_PER_SEQ
from bert_pipeline.model.config import CLASSIFIER_POOLINGS, PRESETS, BertConfig
from bert_pipeline.params import ConfigError, parse_params, require

# "auto": bf16-mixed where the device has bf16 units, else 32 (16-mixed on such a GPU)
PRECISIONS = ("auto", "32", "32-true", "bf16-mixed", "bf16-true", "16-mixed", "64", "64-true")
# "auto" follows the examples: dynamic when they hold no masks, else static
MASKING_MODES = ("auto", *EXAMPLE_MASKING)


@dataclass
class OptimizerParams:
    """AdamW as in BERT: decoupled weight decay (none on biases and LayerNorm), eps 1e-6."""

    lr: float = 1e-3
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-6

    def check(self, root: str) -> None:
        require(self.lr > 0, root, "lr", "must be > 0", self.lr)
        require(self.weight_decay >= 0, root, "weight_decay", "must be >= 0", self.weight_decay)
        require(self.eps > 0, root, "eps", "must be > 0", self.eps)
        require(all(0 <= b < 1 for b in self.betas), root, "betas", "must be in [0, 1)", self.betas)


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
        require(
            self.precision in PRECISIONS,
            root,
            "precision",
            f"must be one of {PRECISIONS}",
            self.precision,
        )
        require(self.num_nodes > 0, root, "num_nodes", "must be > 0", self.num_nodes)
        require(
            self.deterministic in (True, False, "warn"),
            root,
            "deterministic",
            "must be true, false or warn",
            self.deterministic,
        )
        require(
            self.gradient_clip_val >= 0,
            root,
            "gradient_clip_val",
            "must be >= 0",
            self.gradient_clip_val,
        )


# pretrain_data.examples settings the training needs: NSP or not, and dynamic masking's draw
EXAMPLE_SETTINGS = ("next_sentence", "masked_lm_prob", "max_predictions_per_seq", "whole_word_mask")
# What the LM head learns: the masked tokens (BERT) or every next token, left to right
OBJECTIVES = ("mlm", "ltr")


def lm_metric(objective: str, name: str) -> str:
    """A held-out metric of the LM head, named by its objective: val/mlm_accuracy, val/ltr_loss."""
    return f"val/{objective}_{name}"


def metrics_objective(metrics: Iterable[str]) -> str:
    """The objective whose LM metrics are among `metrics` (names, or a dict of them)."""
    names = set(metrics)
    return next((o for o in OBJECTIVES if lm_metric(o, "accuracy") in names), "mlm")


@dataclass
class ModelParams:
    preset: str = "tiny"
    overrides: dict[str, Any] = field(default_factory=dict)
    init_from: str | None = None  # HF-format folder to continue pretraining from

    def check(self, root: str) -> None:
        """The preset and overrides make a BertConfig now, not when training starts after the
        data stages (the vocabulary size, and `init_from`'s architecture, are checked then)."""
        require(
            self.preset in PRESETS, root, "preset", f"must be one of {sorted(PRESETS)}", self.preset
        )
        if self.init_from:
            return
        try:
            BertConfig.from_preset(self.preset, **self.overrides)
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                f"parameter {root}.overrides={self.overrides!r} does not give a valid BertConfig "
                f"with preset {self.preset!r}: {exc}"
            ) from None


@dataclass
class ScheduleParams:
    warmup_steps: int = 100
    max_steps: int = 1000
    # A time budget besides the steps: training stops after this many minutes (or at max_steps)
    # and the learning rate follows the share of the budget used. Not reproducible step for step
    # (it depends on the machine's speed); null: the step budget alone.
    budget_minutes: float | None = None


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
    # "mlm": BERT's masked LM; "ltr": a left-to-right LM (every next token, causal attention,
    # kept at fine-tuning: config.json's is_decoder), the paper's "LTR & No NSP" ablation, on
    # examples made with pretrain_data.examples.next_sentence=false
    objective: str = "mlm"
    # torch.compile for training (fused element-wise kernels): true, false or auto (where it
    # pays: bf16 on a CPU with a C++ compiler, a GPU with Triton)
    compile: Any = False
    # data
    masking: str = "auto"
    # How the examples were made: the pipeline fills these from their manifest (for_examples)
    masked_lm_prob: float = MASKED_LM_PROB
    max_predictions_per_seq: int = MAX_PREDICTIONS_PER_SEQ
    whole_word_mask: bool = False  # dynamic masks take a word and its ## pieces together
    next_sentence: bool = True  # false: MLM loss only (the examples' B always continues A)
    # The training loss is mlm + nsp_loss_weight * nsp (the paper: 1)
    nsp_loss_weight: float = 1.0
    pad_to_multiple_of: int = 8
    # Ascending token bounds: each training batch takes examples of one band of lengths, padded
    # to its bound (one compiled graph per bound). The last bound must hold the longest example;
    # bounds above it are cut to it. None: batches of any lengths, padded to their longest row.
    length_buckets: list[int] | None = None
    # How a step averages its masked-LM loss. "step": over that step's masked tokens (google's
    # run_pretraining.py). "dataset": summed over them and divided by the training set's mean
    # masked tokens per step, so every masked token weighs the same in every step; with
    # length_buckets a step of short examples otherwise weighs each of its tokens about twice.
    mlm_loss_average: str = "step"
    val_split: float = 0.05
    num_workers: int = 0
    # loop / logging
    val_every_n_steps: int = 100
    log_every_n_steps: int = 10
    checkpoint_every_n_steps: int = 250
    # keep every checkpoint, not only the latest: a learning curve of fine-tuning results over
    # pretraining steps (the paper's Figure 5) exports them (benchmarks/ablation.py)
    keep_checkpoints: bool = False
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
        cfg = cls.from_params({**(params or {}), **made})
        if cfg.objective == "ltr" and cfg.next_sentence:
            raise ConfigError(
                f"parameter {cls.ROOT}.objective=ltr is the paper's LTR & No NSP: its examples "
                "must be made with pretrain_data.examples.next_sentence=false (these have "
                "next-sentence pairs); rerun pretrain_data with it"
            )
        return cfg

    def check(self, root: str = ROOT) -> None:
        self.check_devices(root)
        self.model.check(f"{root}.model")
        self.optimizer.check(f"{root}.optimizer")
        for name in (
            "batch_size",
            "accumulate_grad_batches",
            "val_every_n_steps",
            "log_every_n_steps",
            "checkpoint_every_n_steps",
        ):
            require(getattr(self, name) > 0, root, name, "must be > 0", getattr(self, name))
        steps = self.schedule
        require(steps.max_steps > 0, root, "schedule.max_steps", "must be > 0", steps.max_steps)
        require(
            0 <= steps.warmup_steps <= steps.max_steps,
            root,
            "schedule.warmup_steps",
            f"must be in [0, max_steps={steps.max_steps}]",
            steps.warmup_steps,
        )
        require(
            steps.budget_minutes is None or steps.budget_minutes > 0,
            root,
            "schedule.budget_minutes",
            "must be > 0 or null",
            steps.budget_minutes,
        )
        require(
            self.objective in OBJECTIVES,
            root,
            "objective",
            f"must be one of {list(OBJECTIVES)}",
            self.objective,
        )
        require(
            self.objective == "mlm" or self.masking != "dynamic",
            root,
            "masking",
            "cannot be dynamic with objective ltr: a left-to-right LM reads the unmasked text "
            "(static masks are undone); leave it auto",
            self.masking,
        )
        require(
            self.compile in (True, False, "auto"),
            root,
            "compile",
            "must be true, false or auto",
            self.compile,
        )
        check_dropout(self.dropout, root)
        require(
            self.nsp_loss_weight >= 0,
            root,
            "nsp_loss_weight",
            "must be >= 0",
            self.nsp_loss_weight,
        )
        require(
            self.masking in MASKING_MODES,
            root,
            "masking",
            f"must be one of {MASKING_MODES}",
            self.masking,
        )
        require(
            0 < self.val_split < 1 or (float(self.val_split).is_integer() and self.val_split >= 1),
            root,
            "val_split",
            "must be a fraction in (0, 1) or a whole number of held-out examples >= 1",
            self.val_split,
        )
        require(self.num_workers >= 0, root, "num_workers", "must be >= 0", self.num_workers)
        require(
            self.mlm_loss_average in ("step", "dataset"),
            root,
            "mlm_loss_average",
            "must be step or dataset",
            self.mlm_loss_average,
        )
        require(
            self.mlm_loss_average == "step" or self.objective == "mlm",
            root,
            "mlm_loss_average",
            "dataset needs objective mlm (an ltr step predicts all of its tokens)",
            self.mlm_loss_average,
        )
        buckets = self.length_buckets
        require(
            buckets is None
            or (
                len(buckets) > 0
                and all(isinstance(b, int) and b > 0 for b in buckets)
                and list(buckets) == sorted(set(buckets))
            ),
            root,
            "length_buckets",
            "must be null or a list of ascending token counts > 0",
            buckets,
        )


@dataclass
class FinetuneConfig(DeviceParams):
    """Hyperparameters of one task (paper defaults: batch 32, 3 epochs, lr in {5,4,3,2}e-5)."""

    learning_rates: list[float] = field(default_factory=lambda: [2e-5])
    seeds: list[int] = field(default_factory=lambda: [42])
    batch_size: int = 32
    eval_batch_size: int = 128
    epochs: int = 3
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    max_seq_length: int = 128
    lowercase: bool = True
    log_every_n_steps: int = 10
    deterministic: Any = True
    # a randomly initialised BiLSTM of this width per direction between the encoder and the
    # task head (the paper's "+ BiLSTM" row of Table 5); null: none
    head_lstm_size: int | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, Any], where: str) -> FinetuneConfig:
        """Typed and checked; errors name the parameter as `<where>.<key>`."""
        return parse_params(cls, params, where)

    def check(self, root: str) -> None:
        self.check_devices(root)
        for name in ("learning_rates", "seeds"):
            values = getattr(self, name)
            require(
                bool(values) and len(set(values)) == len(values),
                root,
                name,
                "must be a non-empty list of distinct values (trials are named by them)",
                values,
            )
        for name in (
            "batch_size",
            "eval_batch_size",
            "epochs",
            "max_seq_length",
            "log_every_n_steps",
        ):
            require(getattr(self, name) >= 1, root, name, "must be >= 1", getattr(self, name))
        require(
            0 <= self.warmup_proportion < 1,
            root,
            "warmup_proportion",
            "must be in [0, 1)",
            self.warmup_proportion,
        )
        for name in ("devices", "num_nodes"):
            require(
                getattr(self, name) == 1,
                root,
                name,
                "must be 1: a task trains on one device",
                getattr(self, name),
            )
        require(
            min(self.learning_rates) > 0,
            root,
            "learning_rates",
            "must be > 0",
            self.learning_rates,
        )
        require(self.weight_decay >= 0, root, "weight_decay", "must be >= 0", self.weight_decay)
        require(
            self.head_lstm_size is None or self.head_lstm_size >= 1,
            root,
            "head_lstm_size",
            "must be >= 1 or null",
            self.head_lstm_size,
        )


def check_dropout(value: float | None, root: str) -> None:
    """A `dropout` rate (pretraining's or fine-tuning's): null keeps the model config's."""
    require(value is None or 0 <= value < 1, root, "dropout", "must be in [0, 1) or null", value)


def check_classifier_pooling(value: str, root: str) -> None:
    """A sequence head's `classifier_pooling` (GLUE's classifier, SWAG's choice scorer)."""
    require(
        value in CLASSIFIER_POOLINGS,
        root,
        "classifier_pooling",
        f"must be one of {list(CLASSIFIER_POOLINGS)}",
        value,
    )


@dataclass
class TrialParams:
    """One trial of the lr x seed grid; the total step count comes from the Trainer."""

    learning_rate: float
    seed: int
    weight_decay: float
    warmup_proportion: float
    tag: str = ""  # a further grid axis of the task (the feature-based tagger's layer choice)

    @property
    def name(self) -> str:
        """Prefix of the trial's metrics in the task's MLflow run."""
        prefix = f"{self.tag}_" if self.tag else ""
        return f"{prefix}lr_{self.learning_rate:g}_seed_{self.seed}"
