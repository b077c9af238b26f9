"""The `finetune_glue` parameters, typed and checked: the run guard parses them before the
first node, so this module imports no ML framework."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bert_pipeline.params import parse_params, require
from bert_pipeline.training.config import (
    FinetuneConfig,
    check_classifier_pooling,
    check_dropout,
)


def dropout_tag(rate: float) -> str:
    """The trial tag of a fine-tuning dropout rate in a `dropout` grid."""
    return f"dropout_{rate:g}"


@dataclass
class GlueConfig(FinetuneConfig):
    """The shared hyperparameters plus what the classifier reads: `classifier_pooling` "cls"
    (the paper's pooled [CLS]) or "mean" (the mean of the last layer, for encoders pretrained
    without NSP); the model config's field of that name, which config.json keeps."""

    classifier_pooling: str = "cls"
    # Where the trial (lr, seed) and epoch are chosen: 0 on dev, as the paper (dev then scores
    # its own choice); a share in (0, 1) holds that much of train out of training, chosen by
    # `holdout_seed`, and chooses on it: dev is then reported, never used to choose.
    selection_holdout: float = 0.0
    holdout_seed: int = 0
    # More than one: the grid runs once per hold-out (seeds holdout_seed, holdout_seed + 1, ...)
    # and chooses on their pooled scores, as one hold-out of a small task can be too few rows to
    # tell the grid's cells apart; needs `refit` to deliver one model
    holdouts: int = 1
    # After a hold-out chose: train the chosen rate's seeds again on all of train, each stopped
    # at the epoch its trial chose (over several hold-outs, the median of their epochs), so the
    # hold-out's rows are trained on too
    refit: bool = False
    # None: the pretrained weights; a seed: a random init of the same architecture and
    # vocabulary drawn from it, fine-tuned with the same grid (the baseline pretraining must beat)
    random_init_seed: int | None = None
    # Hidden and attention dropout while fine-tuning (None: the checkpoint config's, 0.1 for
    # BERT); a list of rates is one more grid axis, chosen with the learning rate. The saved
    # model's config records the rate it was trained with
    dropout: Any = None

    @property
    def dropout_grid(self) -> dict[str, float | None]:
        """Trial tag -> dropout rate: one untagged trial set unless `dropout` is a list."""
        if isinstance(self.dropout, list):
            return {dropout_tag(rate): rate for rate in self.dropout}
        return {"": self.dropout}

    @property
    def holdout_seeds(self) -> list[int]:
        """The seeds of the hold-outs a grid chooses on."""
        return list(range(self.holdout_seed, self.holdout_seed + self.holdouts))

    def check(self, root: str) -> None:
        super().check(root)
        rates = self.dropout if isinstance(self.dropout, list) else [self.dropout]
        numbers = (
            r is None or (isinstance(r, int | float) and not isinstance(r, bool)) for r in rates
        )
        require(
            len(rates) > 0
            and all(numbers)
            and (len(rates) == 1 or None not in rates)
            and len(self.dropout_grid) == len(rates),  # distinct trial names
            root,
            "dropout",
            "must be null, a rate, or a list of distinct rates",
            self.dropout,
        )
        for rate in rates:
            check_dropout(rate, root)
        require(
            0 <= self.selection_holdout < 1,
            root,
            "selection_holdout",
            "must be in [0, 1): 0 chooses on dev, a share of train chooses on that share",
            self.selection_holdout,
        )
        require(self.holdout_seed >= 0, root, "holdout_seed", "must be >= 0", self.holdout_seed)
        require(
            self.holdouts == 1 or (self.holdouts > 1 and self.refit),
            root,
            "holdouts",
            "must be 1, or more with refit: true (which delivers one model from their choice)",
            self.holdouts,
        )
        require(
            not self.refit or self.selection_holdout > 0,
            root,
            "refit",
            "needs selection_holdout > 0: with choices made on dev there is nothing to refit on",
            self.refit,
        )
        require(
            self.random_init_seed is None or self.random_init_seed >= 0,
            root,
            "random_init_seed",
            "must be null (the pretrained weights) or a seed >= 0",
            self.random_init_seed,
        )
        check_classifier_pooling(self.classifier_pooling, root)


@dataclass
class GlueData:
    max_train_examples: int | None = None  # seeded subsample of train per task; None: all
    max_eval_examples: int | None = None  # the same for each dev split
    sample_seed: int = 0


@dataclass
class GlueParams:
    """The `finetune_glue` parameters; a task's GlueConfig is `defaults` overridden by
    `hyperparameters.<task>` (`task_config`)."""

    tasks: list[str] = field(default_factory=list)
    init_from_mnli: list[str] = field(default_factory=list)
    registered_model_name: str | None = None
    data: GlueData = field(default_factory=GlueData)
    defaults: dict[str, Any] = field(default_factory=dict)
    hyperparameters: dict[str, Any] = field(default_factory=dict)

    def task_config(self, task: str, root: str = "finetune_glue") -> GlueConfig:
        GlueConfig.from_params(self.defaults, f"{root}.defaults")
        overrides = self.hyperparameters.get(task) or {}
        return GlueConfig.from_params(
            {**self.defaults, **overrides}, f"{root}.hyperparameters.{task}"
        )

    def task_configs(self, tasks: list[str], root: str = "finetune_glue") -> dict[str, GlueConfig]:
        """Every task's config; a task that starts from the MNLI model (`init_from_mnli`) must
        read what MNLI's classifier read (a mean-pooled one, or one with a BiLSTM, has no
        pooler)."""
        configs = {task: self.task_config(task, root) for task in tasks}
        for task in self.init_from_mnli:
            if task in configs and "mnli" in configs:
                for name in ("classifier_pooling", "head_lstm_size"):
                    ours, mnli = getattr(configs[task], name), getattr(configs["mnli"], name)
                    require(
                        ours == mnli,
                        f"{root}.hyperparameters.{task}",
                        name,
                        f"but init_from_mnli starts {task} from the MNLI model fine-tuned with "
                        f"{name}={mnli!r}: use the same for both",
                        ours,
                    )
        return configs


def glue_params(params: Mapping[str, Any] | None) -> GlueParams:
    return parse_params(GlueParams, params, "finetune_glue")
