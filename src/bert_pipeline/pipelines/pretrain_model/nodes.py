"""Thin Kedro wrappers around `bert_pipeline.training`."""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import pandas as pd
from tokenizers import Tokenizer

from bert_pipeline.data.shards import ExampleShards
from bert_pipeline.model.card import pretrained_card
from bert_pipeline.params import ConfigError
from bert_pipeline.tracking import (
    active_run,
    describe_run,
    log_model,
    log_params,
    log_table_input,
)
from bert_pipeline.training.config import (
    TrainingConfig,
    lm_metric,
    metrics_objective,
)

logger = logging.getLogger(__name__)

PRETRAINED_MODEL = "bert-pretrained"  # the LoggedModel's name (the registered one is a parameter)


def _local_processes(cfg: TrainingConfig) -> int:
    """How many processes this machine needs: the device count when it is more than one."""
    import torch

    if cfg.num_nodes > 1:
        raise ConfigError(
            f"pretrain_model.num_nodes={cfg.num_nodes}: a Kedro node runs on one machine; start "
            "`python -m bert_pipeline.training.launch` on every node with torchrun or srun instead"
        )
    if isinstance(cfg.devices, int) and cfg.devices > 0:
        return cfg.devices
    if cfg.accelerator in ("gpu", "cuda", "auto") and torch.cuda.is_available():
        return max(1, torch.cuda.device_count())
    return 1


def pretrain_bert(
    examples: ExampleShards,
    tokenizer: Tokenizer,
    params: dict[str, Any],
) -> tuple[dict[str, Any], pd.DataFrame, dict[str, Any]]:
    """Pretrains BERT; returns (checkpoint for the catalog, history table, final metrics).

    Metrics go live into the MLflow run kedro-mlflow opened for this pipeline. With more than
    one device the training runs under torchrun in child processes (never `kedro run` per rank).
    Examples made with another tokenizer (a data run that did not finish) are refused; NSP and
    the dynamic-masking draw are the examples' own settings (their manifest).
    """
    import pyarrow as pa
    import torch

    from bert_pipeline.model.checkpoint import model_to_checkpoint
    from bert_pipeline.training.hardware import choose
    from bert_pipeline.training.launch import launch_subprocess
    from bert_pipeline.training.trainer import run_training

    examples.check_tokenizer(tokenizer)
    cfg = TrainingConfig.for_examples(params, examples)
    choice = choose(cfg.precision, cfg.compile, cfg.accelerator)
    # this process's intra-op threads: every core, unless the user's OMP_NUM_THREADS says fewer
    used = {**choice.params(), "torch_threads": torch.get_num_threads()}
    log_params({f"pretrain_model.{name}": value for name, value in used.items()})
    run_id, tracking_uri = active_run()
    folder = examples.paths()[0].parent
    log_table_input(
        "pretraining_examples",
        folder,
        digest=hashlib.sha256(json.dumps(examples.manifest, sort_keys=True).encode()).hexdigest(),
        rows=int(examples.manifest.get("n_examples", 0)),
        schema=pa.ipc.open_file(pa.memory_map(str(examples.paths()[0]))).schema,
    )
    nproc = _local_processes(cfg)
    if nproc > 1:
        model, history, metrics = launch_subprocess(
            examples,
            tokenizer,
            params,
            nproc,
            mlflow_run_id=run_id,
            mlflow_tracking_uri=tracking_uri,
        )
    else:
        result = run_training(
            examples, tokenizer, cfg, mlflow_run_id=run_id, mlflow_tracking_uri=tracking_uri
        )
        model, history, metrics = result.model, result.history, result.metrics
    checkpoint = model_to_checkpoint(model, tokenizer)
    if run_id is not None:  # config.json names the run that trained the weights (lineage)
        checkpoint["config"]["mlflow_run_id"] = run_id
    return checkpoint, history, metrics


def describe_pretrained_model(
    checkpoint: dict[str, Any],
    statistics: dict[str, Any],
    examples: ExampleShards,
    metrics: dict[str, Any],
    params: dict[str, Any],
    mlflow_params: dict[str, Any],
) -> str:
    """The model card (README.md) of the exported folder; refused when the statistics report
    describes other examples than those trained on."""
    from bert_pipeline.training.hardware import choose

    examples.check_statistics(statistics, "pretrain_data_statistics")
    cfg = TrainingConfig.from_params(params)
    choice = choose(cfg.precision, cfg.compile, cfg.accelerator)  # what "auto" meant here
    return pretrained_card(
        checkpoint["config"],
        statistics,
        metrics,
        {**params, "precision": choice.precision, "compile": choice.compile},
        registered_name=mlflow_params.get("registered_model_name"),
    )


def log_pretrained_model(
    checkpoint: dict[str, Any],
    card: str,
    examples: ExampleShards,
    metrics: dict[str, Any],
    params: dict[str, Any],
) -> dict[str, Any]:
    """The exported model, its card and final validation metrics as the (registered) pyfunc
    model `bert-pretrained` of the run; what was logged, for the reports. It truncates input
    at the examples' length (the positions the model was trained on). Outside an MLflow run
    (tracking disabled) nothing is logged."""
    if active_run()[0] is None:
        logger.info("no active MLflow run: the pretrained model is not logged to MLflow")
        return {"model_uri": None}
    final = {k: v for k, v in metrics.items() if k.startswith("val/")}
    objective = metrics_objective(final)
    accuracy, loss = lm_metric(objective, "accuracy"), lm_metric(objective, "loss")
    logged = log_model(
        checkpoint | {"model_card": card},
        pd.DataFrame({"text_a": list(params["input_example"])}),
        name=PRETRAINED_MODEL,
        metrics=final,
        key_metric=accuracy,
        step=int(metrics["global_step"]),  # the final validation's step: no new chart point
        registered_name=params.get("registered_model_name"),
        max_seq_length=int(examples.made_with("max_seq_length")["max_seq_length"]),
    )
    describe_run(
        f"Pretrained BERT ({metrics['global_step']} steps): validation {objective.upper()} "
        f"accuracy {final.get(accuracy, float('nan')):.4f}, {objective.upper()} loss "
        f"{final.get(loss, float('nan')):.4f}. Model: {logged['model_uri']}"
    )
    return logged


def plot_loss_curve(history: pd.DataFrame):
    """A matplotlib figure: training and validation LM loss (left; masked LM, or left-to-right
    for the LTR objective) and validation accuracies (right) against steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4))
    series = {name: group.sort_values("step") for name, group in history.groupby("metric")}
    objective = metrics_objective(series)
    what = objective.upper()
    for name, style in (
        ("train/loss", dict(color="tab:gray", alpha=0.6, label="train loss (LM + NSP)")),
        (f"train/{objective}_loss", dict(color="tab:blue", label=f"train {what} loss")),
        (lm_metric(objective, "loss"), dict(color="tab:red", marker="o", label=f"val {what} loss")),
    ):
        if name in series:
            ax_loss.plot(series[name]["step"], series[name]["value"], **style)
    ax_loss.set_xlabel("optimizer step")
    ax_loss.set_ylabel("cross-entropy")
    ax_loss.set_title("Pretraining loss")
    ax_loss.legend()
    accuracies = ((lm_metric(objective, "accuracy"), "tab:red"), ("val/nsp_accuracy", "tab:green"))
    for name, color in accuracies:
        if name in series:
            ax_acc.plot(
                series[name]["step"],
                series[name]["value"],
                marker="o",
                color=color,
                label=name.removeprefix("val/").replace("_", " "),
            )
    ax_acc.set_xlabel("optimizer step")
    ax_acc.set_ylabel("accuracy")
    ax_acc.set_ylim(0, 1)
    ax_acc.set_title("Validation accuracy")
    ax_acc.legend()
    fig.tight_layout()
    return fig
