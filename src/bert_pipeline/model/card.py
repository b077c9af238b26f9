"""Model cards: the README.md of an exported BERT folder (and of its MLflow model).

What a user of the folder needs without the project at hand: what was trained on what, with
which settings, how well it did, what it is for, and how to load it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from bert_pipeline.glue.tasks import HOLDOUT
from bert_pipeline.training.config import lm_metric, metrics_objective

# The project declares no license: "other" is the hub's value for terms it does not list.
LICENSE = "other"
# Our metric names -> the hub's metric ids (https://hf.co/metrics).
HUB_METRICS = {
    "matthews_corr": "matthews_correlation",
    "pearson": "pearsonr",
    "spearman": "spearmanr",
}
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def front_matter(
    pipeline_tag: str,
    metrics: Sequence[str],
    *,
    datasets: Sequence[str] = (),
    tags: Sequence[str] = (),
    base_model: str | None = None,
    transformers: bool = True,
) -> list[str]:
    """The YAML header the Hugging Face hub reads (license, language, task, data, metrics).

    `base_model` is kept only when it names a hub model (`owner/name`), not a local folder;
    `transformers` False leaves out `library_name` (a model transformers would misread).
    """
    meta: dict[str, Any] = {"license": LICENSE, "language": ["en"]}
    if transformers:
        meta["library_name"] = "transformers"
    meta |= {"pipeline_tag": pipeline_tag, "tags": ["bert", "bert_pipeline", *tags]}
    if datasets:
        meta["datasets"] = list(datasets)
    meta["metrics"] = sorted({HUB_METRICS.get(m, m) for m in metrics})
    if base_model and _HUB_ID.fullmatch(base_model) and not Path(base_model).exists():
        meta["base_model"] = base_model
    return ["---", yaml.safe_dump(meta, sort_keys=False).rstrip(), "---", ""]


def _pair_task(data: Mapping[str, Any]) -> str:
    if not data.get("next_sentence", True):
        return "no (MLM only)"
    return "sentence order (label 1: A and B swapped)" if data.get("sentence_order") else "yes"


def _architecture(config: Mapping[str, Any]) -> str:
    return (
        f"{config['num_hidden_layers']} layers, hidden size {config['hidden_size']}, "
        f"{config['num_attention_heads']} attention heads, vocabulary {config['vocab_size']:,} "
        f"WordPiece tokens, up to {config['max_position_embeddings']} positions"
    )


def _loading(registered_name: str | None, model_class: str, transformers: bool = True) -> list[str]:
    """`transformers` False: a model transformers would read differently (a mean-pooled head)."""
    lines = ["## How to load", "", "```python"]
    if transformers:
        lines += [
            "import transformers  # Hugging Face transformers, from this folder",
            f'model = transformers.{model_class}.from_pretrained("<this folder>")',
        ]
    lines += [
        "from bert_pipeline.model import " + model_class + "  # or this project's model",
        "from bert_pipeline.model.checkpoint import load_pretrained",
        f'model = load_pretrained("<this folder>", {model_class})',
    ]
    if registered_name:
        lines += [
            "import mlflow  # or the registered MLflow model: a table of text_a (+ text_b) in",
            f'model = mlflow.pyfunc.load_model("models:/{registered_name}/latest")',
        ]
    return [*lines, "```"]


def pretrained_card(
    config: Mapping[str, Any],
    statistics: Mapping[str, Any],
    metrics: Mapping[str, Any],
    params: Mapping[str, Any],
    registered_name: str | None = None,
) -> str:
    """The card of a pretrained BERT: data statistics, recipe, held-out MLM/NSP results."""
    data = statistics.get("parameters") or {}
    schedule, optimizer = params.get("schedule") or {}, params.get("optimizer") or {}
    nsp = metrics.get("val/nsp_accuracy")
    objective = metrics_objective(metrics)
    ltr = objective == "ltr"  # the left-to-right ablation
    what = "Next-token" if ltr else "Masked-LM"
    accuracy, loss = (
        metrics[lm_metric(objective, "accuracy")],
        metrics[lm_metric(objective, "loss")],
    )
    held_out = metrics.get("num_val_examples")
    result = f"- {what} accuracy {accuracy:.4f}, loss {loss:.3f} ({held_out} examples)"
    lines = [
        *front_matter("feature-extraction" if ltr else "fill-mask", ["accuracy"]),
        "# BERT pretrained with bert_pipeline",
        "",
        (
            "A left-to-right BERT (causal attention, the paper's LTR & No NSP ablation) whose LM "
            "head predicts the next token"
            if ltr
            else "A BERT encoder with masked-LM and next-sentence heads"
        )
        + f" ({_architecture(config)}), pretrained from scratch by "
        "`kedro run --pipeline pretrain` (bert_pipeline).",
        "",
        "## Training data",
        "",
        f"- {statistics['n_examples']:,} examples from {statistics['n_documents']:,} documents, "
        f"{statistics['n_tokens']:,} tokens (mean length {statistics['mean_length']:.1f}, "
        f"max_seq_length {data.get('max_seq_length')}); the source corpus is the MLflow run's "
        "dataset input.",
        f"- Masking: {statistics.get('masking')}"
        f"{', by whole word' if data.get('whole_word_mask') else ''}, "
        f"{data.get('masked_lm_prob')} of the tokens, at "
        f"most {data.get('max_predictions_per_seq')} per example, dupe_factor "
        f"{data.get('dupe_factor')}; next-sentence pairs: "
        f"{_pair_task(data)} "
        f"(is-next rate {statistics['is_next_rate']:.3f}).",
        "",
        "## Training",
        "",
        f"- {metrics.get('global_step')} steps of batch {params.get('batch_size')} on "
        f"{metrics.get('world_size', 1)} device(s), {metrics.get('num_train_examples'):,} "
        "training examples; AdamW lr "
        f"{optimizer.get('lr')}, weight decay {optimizer.get('weight_decay')}, linear warmup over "
        f"{schedule.get('warmup_steps')} steps then linear decay, seed {params.get('seed')}.",
        f"- Precision {params.get('precision', '32')}"
        + (", torch.compile" if params.get("compile") else "")
        + (
            f"; dropout {dropout} while pretraining (config.json keeps "
            f"{config.get('hidden_dropout_prob')} for fine-tuning)."
            if (dropout := params.get("dropout")) is not None
            else f"; dropout {config.get('hidden_dropout_prob')}."
        ),
        "",
        "## Results (held-out documents)",
        "",
        result + (f"; next-sentence accuracy {nsp:.4f}." if nsp is not None else "."),
        "",
        "## Intended use",
        "",
        "A starting point for fine-tuning (`kedro run --pipeline finetune_glue --params "
        "glue_model_dir=<this folder>`) or for sentence embeddings. It has seen only the text "
        "above: no safety or bias evaluation was done, and a small model pretrained on a small "
        "budget is far below published BERT checkpoints.",
        "",
        *_loading(registered_name, "BertForPreTraining"),
    ]
    return "\n".join(lines) + "\n"


def _classifier_reads(config: Mapping[str, Any]) -> str | None:
    """What a sequence classifier reads when it is not transformers' pooled [CLS], else None."""
    encoder = "a left-to-right encoder's" if config.get("is_decoder") else "the"
    if config.get("head_lstm_size"):
        return f"the final states of a BiLSTM (head_lstm_size) over {encoder} last layer"
    pooling = config.get("classifier_pooling", "cls")
    if pooling == "mean":
        return f"the mean of {encoder} last layer over the tokens (pooling: mean)"
    if pooling == "last":
        return f"the last token of {encoder} last layer (pooling: last)"
    return None


def _choice(record: Mapping[str, Any]) -> str:
    """How a GLUE record's model was chosen (and refit)."""
    best, trials = record["best"], len(record["trials"])
    where = "a held-out slice of train" if HOLDOUT in record.get("selected_on", {}) else "dev"
    rate = f"lr {best['learning_rate']:g}"
    if "dropout" in best:
        rate += f", dropout {best['dropout']:g}"
    if not record.get("refits"):
        return (
            f"- Best of {trials} trial(s) on {where}: {rate}, seed "
            f"{best['seed']}, epoch {best['best_epoch'] + 1}."
        )
    holdouts = len({t.get("holdout_seed") for t in record["trials"]})
    if holdouts > 1:
        where = f"{holdouts} held-out slices of train, pooled"
        epoch = "the median of the epochs its trials chose there"
    else:
        epoch = "the epoch its trial chose there"
    return (
        f"- {rate}: the best mean score of its seeds on {where} "
        f"({trials} trials); its best seed, {best['seed']}, trained again on all "
        f"{record['train_examples']:,} training examples and stopped at {epoch}, "
        f"{best['best_epoch'] + 1}."
    )


def glue_card(
    config: Mapping[str, Any],
    task: str,
    record: Mapping[str, Any],
    source: str,
    registered_name: str | None = None,
) -> str:
    """The card of a GLUE fine-tuned classifier: task, data sizes, chosen trial, dev metrics."""
    metrics = "; ".join(
        f"{split}: " + ", ".join(f"{name} {100 * value:.2f}" for name, value in values.items())
        for split, values in record["dev_metrics"].items()
    )
    labels = list((config.get("id2label") or {}).values())
    labels = labels if len(labels) > 1 else []  # one output: a regression (STS-B)
    reads = _classifier_reads(config)
    cls = reads is None  # transformers' own reading: the pooled [CLS] of a bidirectional encoder
    hub_metrics = [name for values in record["dev_metrics"].values() for name in values]
    lines = [
        *front_matter(
            "text-classification",
            hub_metrics,
            datasets=["nyu-mll/glue"],
            tags=["glue", task],
            base_model=source,
            transformers=cls,
        ),
        f"# BERT fine-tuned on GLUE {task} with bert_pipeline",
        "",
        f"A sequence classifier ({_architecture(config)}) fine-tuned from {source} by "
        f"`kedro run --pipeline finetune_glue` (bert_pipeline).",
        "",
        "## Training data",
        "",
        f"- GLUE {task}: {record['train_examples']:,} training examples, "
        f"{record['dev_examples']:,} dev examples.",
        "",
        "## Training",
        "",
        _choice(record),
        "- The classifier reads the pooled [CLS] (as BERT)."
        if cls
        else f"- The classifier reads {reads}; transformers' BertForSequenceClassification "
        "would read [CLS], so load it with bert_pipeline.",
        "",
        "## Results (dev, x100)",
        "",
        f"- {metrics}",
        "",
        "## Intended use",
        "",
        f"Research on GLUE {task}"
        + (f" (labels: {', '.join(labels)})" if labels else " (a similarity score)")
        + "; not evaluated for use on other text.",
        "",
        *_loading(registered_name, "BertForSequenceClassification", transformers=cls),
    ]
    return "\n".join(lines) + "\n"
