"""Synthetic GLUE fixtures (both the glue_data TSV layout and the hub's Parquet layout) and a
tiny checkpoint. The sentences are generated, so no public text lands in the repository."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pandas as pd

from bert_pipeline.data.tokenizer import save_tokenizer, train_tokenizer
from bert_pipeline.glue.tasks import TASKS, GlueTask, hf_split
from bert_pipeline.model import BertConfig, BertForPreTraining
from bert_pipeline.model.checkpoint import model_to_checkpoint, tokenizer_files_from

WORDS = {
    "subject": ["the cat", "a farmer", "my neighbour", "the old clock", "two birds", "the river"],
    "verb": ["watches", "carries", "finds", "paints", "follows", "hears"],
    "object": ["the lantern", "a red kite", "the quiet harbour", "some bread", "the letter"],
}
SIZES = {"train": 16, "dev": 8, "test": 5}


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS[k]) for k in ("subject", "verb", "object")) + "."


def examples(task: GlueTask, split: str, n: int, seed: int = 0) -> pd.DataFrame:
    """Rows in our table layout: idx, text_a, text_b, label (-1 on test)."""
    rng = random.Random(f"{task.name}-{split}-{seed}")
    test = split.startswith("test")
    rows = []
    for i in range(n):
        text_a = sentence(rng)
        if task.name == "mrpc" and i == 0:
            text_a = 'He said "the harbour is quiet'  # an unbalanced quote: QUOTE_NONE keeps it
        if test:
            label = -1.0 if task.is_regression else -1
        elif task.is_regression:
            label = round(rng.uniform(0, 5), 3)
        else:
            label = i % task.num_labels
        rows.append(
            {
                "idx": i,
                "text_a": text_a,
                "text_b": sentence(rng) if task.is_pair else None,
                "label": label,
            }
        )
    return pd.DataFrame(rows)


def split_sizes(task: GlueTask) -> dict[str, int]:
    sizes = {"train": SIZES["train"]}
    sizes.update({s: SIZES["dev"] for s in task.dev_splits})
    sizes.update({s: SIZES["test"] for s in task.test_splits})
    return sizes


def _tsv_lines(task: GlueTask, split: str, frame: pd.DataFrame) -> list[str]:
    test = split.startswith("test")

    def label(v) -> str:
        return f"{v:.3f}" if task.is_regression else task.labels[int(v)]

    lines = []
    for r in frame.itertuples():
        a, b, i = r.text_a, r.text_b, r.idx
        match task.name:
            case "cola":
                lines.append(f"{i}\t{a}" if test else f"gj04\t{label(r.label)}\t\t{a}")
            case "sst2":
                lines.append(f"{i}\t{a}" if test else f"{a}\t{label(r.label)}")
            case "mrpc":
                ids = f"{1000 + i}\t{2000 + i}"
                lines.append(
                    f"{i}\t{ids}\t{a}\t{b}" if test else f"{label(r.label)}\t{ids}\t{a}\t{b}"
                )
            case "qqp":
                lines.append(
                    f"{i}\t{a}\t{b}"
                    if test
                    else f"{i}\t{10 + i}\t{20 + i}\t{a}\t{b}\t{label(r.label)}"
                )
            case "stsb":
                meta = f"main-captions\tMSRvid\t2012test\t{i:04d}\tnone\tnone"
                lines.append(f"{i}\t{meta}\t{a}\t{b}" + ("" if test else f"\t{label(r.label)}"))
            case "mnli":
                meta = (
                    f"{i}\t{100 + i}\t{100 + i}n\tfiction\t( {a} )\t( {b} )\t(ROOT {a})\t(ROOT {b})"
                )
                if test:
                    lines.append(f"{meta}\t{a}\t{b}")
                elif split == "train":
                    lines.append(f"{meta}\t{a}\t{b}\t{label(r.label)}\t{label(r.label)}")
                else:
                    votes = "\t".join([label(r.label)] * 5)
                    lines.append(f"{meta}\t{a}\t{b}\t{votes}\t{label(r.label)}")
            case _:  # qnli, rte, wnli
                lines.append(f"{i}\t{a}\t{b}" + ("" if test else f"\t{label(r.label)}"))
    return lines


def _tsv_header(task: GlueTask, split: str) -> str | None:
    test = split.startswith("test")
    parse = "sentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\tsentence2_parse"
    headers = {
        "cola": "index\tsentence" if test else None,
        "sst2": "index\tsentence" if test else "sentence\tlabel",
        "mrpc": "index\t#1 ID\t#2 ID\t#1 String\t#2 String"
        if test
        else "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String",
        "qqp": "id\tquestion1\tquestion2"
        if test
        else "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
        "stsb": "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"
        + ("" if test else "\tscore"),
        "mnli": f"index\tpromptID\tpairID\tgenre\t{parse}\tsentence1\tsentence2"
        + (
            ""
            if test
            else "\tlabel1\tgold_label"
            if split == "train"
            else "\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label"
        ),
        "qnli": "index\tquestion\tsentence" + ("" if test else "\tlabel"),
    }
    return headers.get(task.name, "index\tsentence1\tsentence2" + ("" if test else "\tlabel"))


def write_glue_tsv(root: Path, tasks=None, sizes: dict[str, int] | None = None) -> Path:
    """Writes `root/<TaskDir>/<split>.tsv` for the tasks, with each task's real quirks."""
    for name in tasks or TASKS:
        task = TASKS[name]
        folder = root / task.glue_dir
        folder.mkdir(parents=True, exist_ok=True)
        for split, n in (sizes or split_sizes(task)).items():
            frame = examples(task, split, n)
            header = _tsv_header(task, split)
            lines = ([header] if header is not None else []) + _tsv_lines(task, split, frame)
            (folder / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def write_hf_parquet(root: Path, tasks=None) -> Path:
    """Writes `root/<config>/<hf split>-00000-of-00001.parquet` with the hub's column names."""
    for name in tasks or TASKS:
        task = TASKS[name]
        folder = root / task.hf_config
        folder.mkdir(parents=True, exist_ok=True)
        for split, n in split_sizes(task).items():
            frame = examples(task, split, n)
            out = {task.hf_text_columns[0]: frame["text_a"]}
            if task.is_pair:
                out[task.hf_text_columns[1]] = frame["text_b"]
            out["label"] = frame["label"].astype("float32" if task.is_regression else "int64")
            out["idx"] = frame["idx"].astype("int32")
            pd.DataFrame(out).to_parquet(folder / f"{hf_split(task, split)}-00000-of-00001.parquet")
    return root


def tiny_checkpoint(texts: list[str] | None = None, **overrides) -> dict:
    """A randomly initialised 2-layer/128 BERT with a small WordPiece vocabulary."""
    import torch

    rng = random.Random(0)
    texts = texts or [sentence(rng) for _ in range(200)]
    tokenizer = train_tokenizer(texts, vocab_size=200, min_frequency=1)
    torch.manual_seed(0)
    config = BertConfig.from_preset(
        "tiny", vocab_size=tokenizer.get_vocab_size(), max_position_embeddings=64, **overrides
    )
    with tempfile.TemporaryDirectory() as tmp:
        save_tokenizer(tokenizer, tmp)
        files = tokenizer_files_from(tmp)
    return model_to_checkpoint(BertForPreTraining(config), files)


def record_training_losses(monkeypatch, module_cls) -> list[float]:
    """The list every training step of `module_cls` (a FinetuneModule) appends its loss to:
    our side of the per-step comparison with `trainer_losses`."""
    losses: list[float] = []
    original = module_cls.training_step

    def recording(self, batch, batch_idx):
        loss = original(self, batch, batch_idx)
        losses.append(loss.item())
        return loss

    monkeypatch.setattr(module_cls, "training_step", recording)
    return losses


def trainer_losses(model, train_set, dev_set, *, seed: int, epochs: int, batch: int, lr: float):
    """Per-step training losses of transformers' Trainer with the shared recipe's settings
    (linear decay after 10% warmup, AdamW eps 1e-6, clip 1.0, a dev pass per epoch), the
    reference our trials are compared with step by step."""
    import transformers

    losses = []

    class Recording(transformers.Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            out = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            if model.training:
                losses.append((out[0] if return_outputs else out).item())
            return out

    steps = -(-len(train_set) // batch) * epochs
    with tempfile.TemporaryDirectory() as out_dir:
        Recording(
            model=model,
            args=transformers.TrainingArguments(
                output_dir=out_dir,
                per_device_train_batch_size=batch,
                per_device_eval_batch_size=64,
                num_train_epochs=epochs,
                learning_rate=lr,
                lr_scheduler_type="linear",
                warmup_steps=int(0.1 * steps),
                weight_decay=0.01,
                optim="adamw_torch",
                adam_epsilon=1e-6,
                max_grad_norm=1.0,
                seed=seed,
                eval_strategy="epoch",
                save_strategy="no",
                report_to="none",
                use_cpu=True,
                disable_tqdm=True,
                remove_unused_columns=False,  # the datasets' own collate reads every key
            ),
            train_dataset=train_set,
            eval_dataset=dev_set,
            data_collator=train_set.collate,
        ).train()
    return losses
