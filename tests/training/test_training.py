"""Unit tests of the Lightning pretraining code on tiny in-memory data (no Kedro)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch
import yaml
from lightning.pytorch import Callback

from bert_pipeline.data.masking import num_to_predict
from bert_pipeline.data.tokenizer import (
    CLS,
    MASK,
    PAD,
    SEP,
    UNK,
    save_tokenizer,
    special_token_ids,
    train_tokenizer,
)
from bert_pipeline.io.checkpoint_dataset import CheckpointDataset
from bert_pipeline.model import BertConfig, BertForPreTraining, BertModel
from bert_pipeline.model.checkpoint import (
    load_pretrained,
    model_from_checkpoint,
    model_to_checkpoint,
    save_pretrained,
)
from bert_pipeline.params import ConfigError
from bert_pipeline.training.config import TrainingConfig
from bert_pipeline.training.core import linear_warmup_decay, parameter_groups, warmup_steps_of
from bert_pipeline.training.data import (
    BatchRequest,
    ExampleTable,
    PretrainingDataModule,
    ResumableBatchSampler,
    split_indices,
)
from bert_pipeline.training.module import BATCH_KEYS, BertPretrainingModule
from bert_pipeline.training.trainer import run_training
from tests.conftest import PROJECT_ROOT
from tests.training.conftest import EXAMPLE_PARAMETERS, write_shards

_NESTED = {  # short names the tests use -> the parameter paths of pretrain_model
    "lr": ("optimizer", "lr"),
    "warmup_steps": ("schedule", "warmup_steps"),
    "max_steps": ("schedule", "max_steps"),
    "init_from": ("model", "init_from"),
    "model_overrides": ("model", "overrides"),
}


def tiny_config(tmp_path, **overrides) -> TrainingConfig:
    return TrainingConfig.from_params(tiny_params(tmp_path, **overrides))


def tiny_params(tmp_path, **overrides) -> dict:
    """`pretrain_model` parameters of a seconds-long run on the tiny examples."""
    params = {
        "model": {
            "preset": "tiny",
            "overrides": {
                "hidden_size": 32,
                "intermediate_size": 64,
                "max_position_embeddings": 64,
            },
        },
        "optimizer": {"lr": 2e-3},
        "schedule": {"warmup_steps": 2, "max_steps": 6},
        "batch_size": 8,
        "val_split": 0.15,
        "val_every_n_steps": 3,
        "log_every_n_steps": 1,
        "checkpoint_every_n_steps": 3,
        "checkpoint_dir": str(tmp_path / "ckpt"),
        "progress_bar": False,
        "accelerator": "cpu",
    }
    for key, value in overrides.items():
        if key in _NESTED:
            group, name = _NESTED[key]
            params[group][name] = value
        else:
            params[key] = value
    return params


def datamodule(tokenizer, examples, **kwargs) -> PretrainingDataModule:
    ids = special_token_ids(tokenizer)
    return PretrainingDataModule(
        examples,
        pad_token_id=0,
        mask_token_id=ids[MASK],
        vocab_size=tokenizer.get_vocab_size(),
        special_token_ids=[ids[t] for t in (PAD, UNK, CLS, SEP, MASK)],
        **{"batch_size": 8, "val_split": 0.15, "seed": 0, **kwargs},
    )


def test_config_from_params_names_bad_parameter():
    params = {
        "model": {"preset": "mini"},
        "optimizer": {"lr": 5e-4},
        "schedule": {"warmup_steps": 2, "max_steps": 10},
    }
    cfg = TrainingConfig.from_params(params)
    assert (cfg.model.preset, cfg.optimizer.lr, cfg.schedule.max_steps) == ("mini", 5e-4, 10)
    # the node hands the same dict to the multi-device launcher: it must be left intact
    assert params["optimizer"] == {"lr": 5e-4} and params["schedule"]["max_steps"] == 10
    assert TrainingConfig.from_params(params) == cfg
    with pytest.raises(ConfigError, match="pretrain_model.model.init_checkpoint"):
        TrainingConfig.from_params({"model": {"init_checkpoint": "x"}})
    with pytest.raises(ConfigError, match="warmup_steps"):
        TrainingConfig.from_params({"schedule": {"warmup_steps": 20, "max_steps": 10}})
    with pytest.raises(ConfigError, match="pretrain_model.batch_sise"):
        TrainingConfig.from_params({"batch_sise": 3})
    with pytest.raises(ConfigError, match="pretrain_model.optimizer.lr: .*'fast'"):
        TrainingConfig.from_params({"optimizer": {"lr": "fast"}})
    with pytest.raises(ConfigError, match="pretrain_model.optimizer.lr=0.0 must be > 0"):
        TrainingConfig.from_params({"optimizer": {"lr": 0}})
    # YAML reads 5e-5 as a string; the typed parameters take it as the float it means
    assert TrainingConfig.from_params({"optimizer": {"lr": "5e-5"}}).optimizer.lr == 5e-5


def test_config_defaults_are_conf_base():
    """Code that builds a TrainingConfig without Kedro trains as `kedro run` does: the typed
    defaults are conf/base's values (paths from runtime parameters aside)."""
    conf = PROJECT_ROOT / "conf/base/parameters_pretrain_model.yml"
    params = yaml.safe_load(conf.read_text())["pretrain_model"]
    params = {k: v for k, v in params.items() if not (isinstance(v, str) and "${" in v)}
    assert TrainingConfig.from_params(params) == TrainingConfig()


def test_launcher_params_resolve_runtime_params_to_their_defaults(tmp_path):
    from bert_pipeline.training.launch import read_params

    path = tmp_path / "params.yml"
    path.write_text(
        "pretrain_model:\n"
        "  checkpoint_dir: ${runtime_params:data_dir,data}/ckpt\n"
        "  batch_size: ${runtime_params:batch, 16}\n"
        "  model: {init_from: '${runtime_params:init_from,null}'}\n"
        "  optimizer: {lr: 5.0e-4}\n",
        encoding="utf-8",
    )
    params = read_params(path, ["schedule.max_steps=7", "schedule.warmup_steps=1"])
    assert params["checkpoint_dir"] == "data/ckpt" and params["batch_size"] == 16
    assert params["model"]["init_from"] is None and params["schedule"]["max_steps"] == 7
    cfg = TrainingConfig.from_params(params)
    assert (cfg.batch_size, cfg.optimizer.lr, cfg.schedule.max_steps) == (16, 5e-4, 7)


def test_masking_modes_are_the_examples_modes_and_auto():
    from bert_pipeline.data.examples import ExampleConfig
    from bert_pipeline.data.masking import EXAMPLE_MASKING
    from bert_pipeline.training.config import MASKING_MODES

    assert set(MASKING_MODES) == {"auto", *EXAMPLE_MASKING}
    for mode in EXAMPLE_MASKING:
        ExampleConfig(masking=mode).check()
        assert TrainingConfig.from_params({"masking": mode}).masking == mode
    with pytest.raises(ValueError, match="pretrain_data.examples.masking='auto' must be"):
        ExampleConfig(masking="auto").check()
    with pytest.raises(ConfigError, match="pretrain_model.masking='random' must be one"):
        TrainingConfig.from_params({"masking": "random"})


def test_no_weight_decay_on_layernorm_and_biases():
    module = BertPretrainingModule(BertConfig.from_preset("tiny", vocab_size=50).to_dict())
    decay, no_decay = parameter_groups(module.model, 0.01)
    names = {id(p): n for n, p in module.model.named_parameters()}
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    assert all(
        "LayerNorm" in names[id(p)] or names[id(p)].endswith("bias") for p in no_decay["params"]
    )
    assert not any(
        "LayerNorm" in names[id(p)] or names[id(p)].endswith("bias") for p in decay["params"]
    )
    n_params = len(list(module.model.parameters()))
    assert len(decay["params"]) + len(no_decay["params"]) == n_params


def test_linear_warmup_then_linear_decay():
    """google's and transformers' schedule: 0 at step 0, 1 at the end of warmup, 0 at the end."""
    f = linear_warmup_decay(warmup_steps=4, total_steps=10)
    assert [f(s) for s in range(11)] == pytest.approx(
        [0, 0.25, 0.5, 0.75, 1, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6, 0]
    )
    assert linear_warmup_decay(0, 10)(0) == 1.0
    transformers = pytest.importorskip("transformers")
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    hf = transformers.get_linear_schedule_with_warmup(optimizer, 4, 10).lr_lambdas[0]
    assert [f(s) for s in range(11)] == pytest.approx([hf(s) for s in range(11)])


def test_warmup_share_floors_to_whole_steps():
    """As google's run_classifier: int(steps * proportion), so 10% of 19 steps warms up for 1."""
    assert [warmup_steps_of(0.1, n) for n in (0, 9, 10, 19, 20, 1000)] == [0, 0, 1, 1, 2, 100]


def test_split_holds_out_whole_documents(tiny_examples):
    table = ExampleTable(tiny_examples)
    train, val = split_indices(table, 0.2, seed=0)
    assert len(set(train) | set(val)) == len(table) and not set(train) & set(val)
    docs = tiny_examples["a_doc_id"].to_numpy()
    assert not set(docs[train]) & set(docs[val])
    assert 0.1 * len(table) < len(val) < 0.35 * len(table)


def test_sampler_shards_ranks_and_resumes_mid_epoch():
    idx = np.arange(37)
    shards = [
        [
            i
            for b in ResumableBatchSampler(idx, 4, 7, True, True, rank=r, world_size=2)
            for i in b.indices
        ]
        for r in range(2)
    ]
    assert len(shards[0]) == len(shards[1]) and not set(shards[0]) & set(shards[1])

    full = ResumableBatchSampler(idx, 4, 7, shuffle=True, drop_last=True)
    epoch0 = list(full)
    full.consumed = len(full)
    epoch1 = list(full)
    assert [b.indices for b in epoch0] != [b.indices for b in epoch1]  # new order every epoch

    resumed = ResumableBatchSampler(idx, 4, 7, shuffle=True, drop_last=True)
    resumed.load_state_dict({"epoch": 1, "consumed": 3, "world_size": 1})
    assert list(resumed) == epoch1[3:]  # same indices and same masking seeds


def test_length_buckets_batch_like_lengths_and_resume_mid_epoch(caplog):
    lengths = np.random.default_rng(0).integers(8, 129, 300)
    idx = np.arange(300)

    def sampler(**kw):
        given = {"shuffle": True, "drop_last": True, "lengths": lengths, "buckets": [64, 96, 128]}
        return ResumableBatchSampler(idx, 16, 7, **{**given, **kw})

    plain, bucketed = ResumableBatchSampler(idx, 16, 7, True, True), sampler()
    batches = list(bucketed)
    assert len(batches) == len(bucketed) == len(plain) == 300 // 16
    used = np.concatenate([b.indices for b in batches])
    assert len(set(used.tolist())) == len(used)  # every example at most once an epoch
    below = {64: 0, 96: 64, 128: 96}  # each bound's band starts above the bound before it
    for b in batches:
        assert lengths[b.indices].max() <= b.width  # never cut
    pure = [b for b in batches if lengths[b.indices].min() > below[b.width]]
    assert len(pure) >= len(batches) - 3  # at most one mixed batch of remainders per bucket
    assert {b.width for b in pure} == set(below)
    assert [b.width for b in batches] != sorted(b.width for b in batches)  # buckets interleaved

    bucketed.consumed = len(bucketed)
    epoch1 = list(bucketed)
    resumed = sampler()
    resumed.load_state_dict({"epoch": 1, "consumed": 5, "world_size": 1})
    assert list(resumed) == epoch1[5:]

    ranks = [list(sampler(rank=r, world_size=2)) for r in range(2)]
    assert len(ranks[0]) == len(ranks[1]) == 300 // 32  # ranks step together
    assert [b.width for b in ranks[0]] == [b.width for b in ranks[1]]  # one width per step
    shards = [{i for b in r for i in b.indices} for r in ranks]
    assert not shards[0] & shards[1]

    other = sampler()
    with caplog.at_level("WARNING"):
        other.load_state_dict({**sampler(buckets=None).state_dict(), "consumed": 5})
    assert other.consumed == 5  # a changed bucketing resumes the position, with a warning
    assert "length_buckets [64, 96, 128] from a checkpoint written with None" in caplog.text


def test_length_buckets_pad_each_batch_to_its_bound(tiny_tokenizer, tiny_examples):
    longest = int(tiny_examples["input_ids"].map(len).max())
    with pytest.raises(ValueError, match=f"length_buckets: the examples reach {longest} tokens"):
        datamodule(tiny_tokenizer, tiny_examples, length_buckets=[longest - 1])
    dm = datamodule(tiny_tokenizer, tiny_examples, length_buckets=[16, 24, 128, 256])
    buckets = [16, 24, longest]  # the bounds above the longest example cut to it
    assert dm.length_buckets == buckets
    shapes = set()
    for batch in dm.train_dataloader():
        width = batch["input_ids"].shape[1]
        assert width in buckets
        assert batch["attention_mask"].sum(1).max() <= width
        predictions = num_to_predict([width], dm.collate.collator_kwargs["masked_lm_prob"], 20)
        assert batch["masked_lm_positions"].shape[1] == predictions[0]
        shapes.add(tuple(batch["masked_lm_positions"].shape) + (width,))
    assert len(shapes) > 1  # several buckets, each one fixed shape
    assert len(shapes) <= len(buckets)


def test_dynamic_masks_change_every_epoch_but_validation_masks_do_not(
    tiny_tokenizer, tiny_examples
):
    dm = datamodule(tiny_tokenizer, tiny_examples, seed=3)
    assert dm.dynamic_masking
    loader = dm.train_dataloader()
    first = next(iter(loader))
    loader.batch_sampler.consumed = len(loader.batch_sampler)
    second = next(iter(loader))
    assert not torch.equal(first["masked_lm_positions"], second["masked_lm_positions"])
    val1, val2 = next(iter(dm.val_dataloader())), next(iter(dm.val_dataloader()))
    assert torch.equal(val1["input_ids"], val2["input_ids"])


def test_loss_decreases_on_a_tiny_batch(tiny_tokenizer, tiny_examples):
    torch.manual_seed(0)
    batch = next(iter(datamodule(tiny_tokenizer, tiny_examples).train_dataloader()))
    config = BertConfig.from_preset(
        "tiny", vocab_size=tiny_tokenizer.get_vocab_size(), hidden_size=64, intermediate_size=128
    )
    module = BertPretrainingModule(
        config.to_dict(), optimizer={"lr": 3e-3}, warmup_steps=0, max_steps=100
    )
    optimizer = module.configure_optimizers()["optimizer"]
    losses = []
    for _ in range(25):
        loss = module(batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.6 * losses[0], losses


class _Interrupt(Callback):
    """Simulates a crash once `at_step` optimizer steps are done."""

    def __init__(self, at_step: int) -> None:
        self.at_step = at_step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.at_step:
            raise RuntimeError("simulated interruption")


@pytest.mark.parametrize("length_buckets", [None, [24, 64]])
def test_resume_after_interrupt_matches_uninterrupted_run(
    tmp_path, tiny_tokenizer, tiny_shards, length_buckets
):
    """On the memory-mapped example shards, as the pipeline trains."""
    tiny_examples = tiny_shards.table()
    assert tiny_examples.column("input_ids").num_chunks == 2
    config = {"length_buckets": length_buckets}
    straight = run_training(tiny_examples, tiny_tokenizer, tiny_config(tmp_path / "a", **config))

    cfg = tiny_config(tmp_path / "b", **config)
    with pytest.raises(RuntimeError, match="simulated interruption"):
        run_training(tiny_examples, tiny_tokenizer, cfg, extra_callbacks=[_Interrupt(at_step=4)])
    saved = torch.load(tmp_path / "b" / "ckpt" / "last.ckpt", weights_only=False)
    assert saved["global_step"] == 3  # checkpoint every 3 steps: step 4 is lost
    assert saved["loops"]["fit_loop"]["state_dict"]["combined_loader"][0]["consumed"] == 3

    cfg.resume = True
    resumed = run_training(tiny_examples, tiny_tokenizer, cfg)
    assert resumed.metrics["global_step"] == straight.metrics["global_step"] == 6
    steps = resumed.history.loc[resumed.history.metric == "train/loss", "step"]
    assert steps.min() >= 3  # continued, did not restart from step 0

    for (name, a), b in zip(
        straight.model.state_dict().items(), resumed.model.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), f"{name} differs between the straight and the resumed run"
    final_a = torch.load(tmp_path / "a" / "ckpt" / "last.ckpt", weights_only=False)
    final_b = torch.load(tmp_path / "b" / "ckpt" / "last.ckpt", weights_only=False)
    assert final_a["lr_schedulers"] == final_b["lr_schedulers"]
    for sa, sb in zip(
        final_a["optimizer_states"][0]["state"].values(),
        final_b["optimizer_states"][0]["state"].values(),
        strict=True,
    ):
        assert torch.equal(sa["exp_avg"], sb["exp_avg"])


def test_exported_model_round_trips(tmp_path, tiny_tokenizer, tiny_examples):
    result = run_training(tiny_examples, tiny_tokenizer, tiny_config(tmp_path, max_steps=2))
    dataset = CheckpointDataset(path=str(tmp_path / "model"))
    dataset.save(model_to_checkpoint(result.model, {"vocab.txt": b"[PAD]\n"}))
    assert {"config.json", "model.safetensors", "vocab.txt"} <= {
        p.name for p in (tmp_path / "model").iterdir()
    }
    loaded = load_pretrained(tmp_path / "model").eval()
    batch = next(iter(datamodule(tiny_tokenizer, tiny_examples).val_dataloader()))
    keys = ("input_ids", "token_type_ids", "attention_mask", "masked_lm_positions")
    with torch.no_grad():
        a = result.model(**{k: batch[k] for k in keys})
        b = loaded(**{k: batch[k] for k in keys})
    assert torch.equal(a.prediction_logits, b.prediction_logits)
    assert torch.equal(a.seq_relationship_logits, b.seq_relationship_logits)


def test_init_from_imported_checkpoint(tmp_path, tiny_tokenizer, tiny_examples):
    """`model.init_from` takes the checkpoint's architecture and weights (here: BertModel-only)."""
    source = BertModel(
        BertConfig.from_preset(
            "tiny",
            vocab_size=tiny_tokenizer.get_vocab_size(),
            hidden_size=48,
            intermediate_size=96,
            max_position_embeddings=64,
        )
    )
    save_pretrained(source, tmp_path / "imported")
    cfg = tiny_config(
        tmp_path,
        init_from=str(tmp_path / "imported"),
        model_overrides={},
        lr=1e-12,
        warmup_steps=0,
        max_steps=1,
    )
    result = run_training(tiny_examples, tiny_tokenizer, cfg)
    assert result.model.config.hidden_size == 48
    embeddings = result.model.bert.embeddings.word_embeddings.weight
    assert torch.allclose(embeddings, source.embeddings.word_embeddings.weight, atol=1e-6)


def test_init_from_checkpoint_with_too_small_vocabulary(tmp_path, tiny_tokenizer, tiny_examples):
    save_pretrained(BertModel(BertConfig.from_preset("tiny", vocab_size=10)), tmp_path / "small")
    cfg = tiny_config(tmp_path, init_from=str(tmp_path / "small"), model_overrides={})
    with pytest.raises(ConfigError, match="init_from=.*vocab.txt"):
        run_training(tiny_examples, tiny_tokenizer, cfg)


def test_bf16_mixed_precision_trains_on_cpu(tmp_path, tiny_tokenizer, tiny_examples):
    result = run_training(
        tiny_examples, tiny_tokenizer, tiny_config(tmp_path, precision="bf16-mixed", max_steps=3)
    )
    assert result.metrics["global_step"] == 3
    assert np.isfinite(result.metrics["val/mlm_loss"])


def test_example_table_reads_the_shards_in_place(tiny_shards):
    table = ExampleTable(tiny_shards.table())
    for name in ("input_ids", "token_type_ids"):
        for values, offsets in table._lists[name]:
            assert not values.flags.writeable and not offsets.flags.writeable  # memory map views
    assert len(table) == tiny_shards.manifest["n_examples"]
    lengths = table.lengths()  # read once at start-up by the model config, buckets and divisor
    assert table.lengths() is lengths and not lengths.flags.writeable
    assert lengths.sum() == sum(len(table.row(i)["input_ids"]) for i in range(len(table)))


def test_pretraining_refuses_examples_of_another_tokenizer(tmp_path, tiny_shards):
    from bert_pipeline.pipelines.pretrain_model.nodes import pretrain_bert

    other = train_tokenizer(["quite other words", "other words again"], vocab_size=60)
    params = {"checkpoint_dir": str(tmp_path / "ckpt"), "accelerator": "cpu"}
    with pytest.raises(ValueError) as info:
        pretrain_bert(tiny_shards, other, params)
    message = str(info.value)
    assert "\n" not in message
    assert re.match(
        r"pretraining_examples were made with tokenizer sha256 \w{12}, but the tokenizer is "
        r"\w{12}: the last pretrain_data run did not finish; rerun",
        message,
    )


@pytest.mark.parametrize("made_with_nsp", [False, True])
def test_pretraining_takes_nsp_from_the_examples(
    tmp_path, tiny_examples, tiny_tokenizer, made_with_nsp
):
    """An environment that overrides pretrain_data's next_sentence alone switches both sides."""
    from bert_pipeline.pipelines.pretrain_model.nodes import pretrain_bert

    shards = write_shards(
        tiny_examples,
        tiny_tokenizer,
        tmp_path / "ex",
        parameters={**EXAMPLE_PARAMETERS, "next_sentence": made_with_nsp},
    )
    _, history, metrics = pretrain_bert(shards, tiny_tokenizer, tiny_params(tmp_path, max_steps=3))
    assert ("val/nsp_accuracy" in metrics) is made_with_nsp
    assert ("train/nsp_loss" in set(history["metric"])) is made_with_nsp


@pytest.mark.parametrize(
    ("params", "manifest", "message"),
    [
        (
            {"next_sentence": False},
            EXAMPLE_PARAMETERS,
            "parameter pretrain_model.next_sentence: not a training parameter, it is read from the "
            "examples' manifest; set pretrain_data.examples.next_sentence and rerun pretrain_data",
        ),
        (
            {},
            {"max_seq_length": 128},
            "pretraining_examples/manifest.json does not record pretrain_data.examples."
            "next_sentence: rebuild the examples with `kedro run --pipeline pretrain_data`",
        ),
    ],
)
def test_pretraining_refuses_example_settings_it_cannot_trust(
    tmp_path, tiny_examples, tiny_tokenizer, params, manifest, message
):
    from bert_pipeline.pipelines.pretrain_model.nodes import pretrain_bert

    shards = write_shards(tiny_examples, tiny_tokenizer, tmp_path / "ex", parameters=manifest)
    with pytest.raises(ValueError) as info:
        pretrain_bert(shards, tiny_tokenizer, tiny_params(tmp_path) | params)
    assert str(info.value) == message
    assert not (tmp_path / "ckpt").exists()


class KillAt(Callback):
    """A signal to the training process itself as the step after `at_step` starts. SIGKILL:
    no exception, no clean-up; SIGTERM: what a scheduler preempting the job sends."""

    def __init__(self, at_step: int, signum: int = signal.SIGKILL) -> None:
        self.at_step, self.signum = at_step, signum

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.at_step:
            os.kill(os.getpid(), self.signum)


def test_kill_9_then_resume_gives_the_uninterrupted_weights(
    tmp_path, project_root, tiny_tokenizer, tiny_shards
):
    """Every run in a fresh process (thread settings of this one never differ between them)."""
    save_tokenizer(tiny_tokenizer, tmp_path / "tok")

    def train(folder: str, extra: str = "") -> int:
        script = (
            "from pathlib import Path\n"
            "from bert_pipeline.data.shards import load_example_shards\n"
            "from bert_pipeline.data.tokenizer import load_tokenizer\n"
            "from bert_pipeline.training.trainer import run_training\n"
            "from tests.training.test_training import KillAt, tiny_config\n"
            f"cfg = tiny_config(Path({str(tmp_path / folder)!r}))\n"
            f"{extra}\n"
            f"run_training(load_example_shards({str(tiny_shards.paths()[0].parent)!r}),\n"
            f"             load_tokenizer({str(tmp_path / 'tok')!r}), cfg,\n"
            "             extra_callbacks=callbacks)\n"
        )
        run = subprocess.run([sys.executable, "-c", script], cwd=project_root, check=False)
        return run.returncode

    assert train("a", "callbacks = []") == 0
    assert train("b", "callbacks = [KillAt(5)]") == -signal.SIGKILL
    assert train("b", "cfg.resume = True; callbacks = []") == 0

    final_a = torch.load(tmp_path / "a" / "ckpt" / "last.ckpt", weights_only=False)
    final_b = torch.load(tmp_path / "b" / "ckpt" / "last.ckpt", weights_only=False)
    assert final_a["global_step"] == final_b["global_step"] == 6
    for name, a in final_a["state_dict"].items():
        assert torch.equal(a, final_b["state_dict"][name]), f"{name} differs after kill -9"


def test_no_nsp_ablation_trains_on_the_mlm_loss_only(tmp_path, tiny_tokenizer, tiny_examples):
    result = run_training(
        tiny_examples, tiny_tokenizer, tiny_config(tmp_path, next_sentence=False, max_steps=3)
    )
    logged = set(result.history["metric"])
    assert "train/nsp_loss" not in logged and "val/nsp_accuracy" not in result.metrics
    losses = result.history.set_index(["metric", "step"])["value"]
    for step in result.history.loc[result.history.metric == "train/loss", "step"]:
        assert losses[("train/loss", step)] == losses[("train/mlm_loss", step)]


class _NormsBeforeClipping(Callback):
    def __init__(self) -> None:
        self.norms: dict[int, float] = {}

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        grads = [p.grad for p in pl_module.parameters() if p.grad is not None]
        self.norms[trainer.global_step] = float(torch.nn.utils.get_total_norm(grads))


def test_each_logged_gradient_norm_is_its_step_s_before_clipping(
    tmp_path, tiny_tokenizer, tiny_examples
):
    seen = _NormsBeforeClipping()
    config = tiny_config(tmp_path, gradient_clip_val=1e-4, max_steps=6, log_every_n_steps=2)
    result = run_training(tiny_examples, tiny_tokenizer, config, extra_callbacks=[seen])
    logged = result.history.query("metric == 'train/grad_norm'").set_index("step")["value"]
    assert list(logged.index) == [1, 3, 5]
    assert logged.to_dict() == pytest.approx({s: seen.norms[s] for s in logged.index}, rel=1e-5)
    assert (logged > 1e-3).all(), "clipped, each would be at most 1e-4"


def test_nsp_loss_weight_scales_the_nsp_term_of_the_training_loss(
    tmp_path, tiny_tokenizer, tiny_examples
):
    result = run_training(
        tiny_examples, tiny_tokenizer, tiny_config(tmp_path, nsp_loss_weight=3.0, max_steps=3)
    )
    losses = result.history.set_index(["metric", "step"])["value"]
    steps = result.history.loc[result.history.metric == "train/loss", "step"]
    assert len(steps) == 3
    for step in steps:
        mlm, nsp = losses[("train/mlm_loss", step)], losses[("train/nsp_loss", step)]
        assert losses[("train/loss", step)] == pytest.approx(mlm + 3.0 * nsp, rel=1e-5)


def test_fp32_training_steps_take_the_mlm_loss_without_its_logits(
    tmp_path, tiny_tokenizer, tiny_examples, monkeypatch
):
    from bert_pipeline.model import bert

    calls = []

    def counted(*args):
        calls.append(args[0].shape)
        return linear_cross_entropy(*args)

    linear_cross_entropy = bert.linear_cross_entropy
    monkeypatch.setattr(bert, "linear_cross_entropy", counted)
    result = run_training(tiny_examples, tiny_tokenizer, tiny_config(tmp_path, max_steps=3))
    assert len(calls) == 3  # every training step; validation reads the logits
    assert "val/mlm_accuracy" in result.metrics


@pytest.mark.filterwarnings("ignore:You are trying to `self.log")
def test_dataset_loss_average_weighs_every_masked_token_alike(tiny_tokenizer, tiny_examples):
    """`mlm_loss_average: dataset`: a step's MLM loss is its token losses' sum over the training
    set's mean masked tokens per step, so a batch of short examples weighs each token no more."""
    dm = datamodule(tiny_tokenizer, tiny_examples, length_buckets=[16, 24, 64])
    per_step = dm.masked_tokens_per_step()
    lengths = dm.table.lengths()[dm.train_indices]
    assert per_step == pytest.approx(num_to_predict(lengths, 0.15, 20).mean() * 8)
    config = BertConfig.from_preset(
        "tiny", vocab_size=tiny_tokenizer.get_vocab_size(), hidden_size=32, intermediate_size=64
    )
    torch.manual_seed(0)
    step_mean = BertPretrainingModule(config.to_dict(), next_sentence=False).eval()
    by_dataset = BertPretrainingModule(
        config.to_dict(), next_sentence=False, mlm_tokens_per_step=per_step
    ).eval()
    by_dataset.load_state_dict(step_mean.state_dict())
    ratios, counts = set(), []
    for batch in dm.train_dataloader():
        masked = int((batch["masked_lm_labels"] != -100).sum())
        mean = step_mean.training_step(batch, 0)
        assert by_dataset.training_step(batch, 0).item() == pytest.approx(
            mean.item() * masked / per_step, rel=1e-5
        )
        ratios.add(round(masked / per_step, 2))
        counts.append(masked)
    assert min(ratios) < 1 < max(ratios)  # short buckets count less than a mean step
    assert np.mean(counts) == pytest.approx(per_step, rel=0.1)  # what the collator masked


def test_training_takes_the_dataset_loss_average_from_its_config(
    tmp_path, tiny_tokenizer, tiny_examples
):
    cfg = tiny_config(
        tmp_path, next_sentence=False, length_buckets=[24, 64], mlm_loss_average="dataset"
    )
    history = run_training(tiny_examples, tiny_tokenizer, cfg).history
    losses = history.pivot(index="step", columns="metric", values="value")
    assert (losses["train/loss"] != losses["train/mlm_loss"]).all()
    # each step's ratio is its masked tokens over the mean step's: about 1 over the run
    assert (losses["train/loss"] / losses["train/mlm_loss"]).mean() == pytest.approx(1, rel=0.2)


def test_dataset_loss_average_counts_static_masks(tiny_tokenizer, tiny_examples):
    examples = tiny_examples.copy()
    examples["masked_lm_positions"] = [
        np.arange(1, 2 + i % 3, dtype=np.int32) for i in examples.index
    ]
    examples["masked_lm_ids"] = [
        ids[p] for ids, p in zip(examples.input_ids, examples.masked_lm_positions, strict=True)
    ]
    dm = datamodule(tiny_tokenizer, examples, batch_size=4)
    assert not dm.dynamic_masking
    per_row = (dm.train_indices % 3 + 1).mean()
    assert dm.masked_tokens_per_step() == pytest.approx(per_row * 4)


def test_mlm_loss_average_is_step_or_dataset_of_a_masked_lm(tmp_path):
    with pytest.raises(ConfigError, match=r"pretrain_model\.mlm_loss_average.*step or dataset"):
        tiny_config(tmp_path, mlm_loss_average="token")
    with pytest.raises(
        ConfigError, match=r"mlm_loss_average='dataset' dataset needs objective mlm"
    ):
        tiny_config(tmp_path, objective="ltr", mlm_loss_average="dataset")


def test_nsp_loss_weight_must_not_be_negative(tmp_path):
    with pytest.raises(ConfigError, match=r"pretrain_model\.nsp_loss_weight"):
        tiny_config(tmp_path, nsp_loss_weight=-1.0)


def test_left_to_right_objective_predicts_every_next_token(tmp_path, tiny_tokenizer, tiny_examples):
    """ "LTR & No NSP": a causal model whose LM head reads every position for the next token."""
    from bert_pipeline.pipelines.pretrain_model.nodes import pretrain_bert

    shards = write_shards(
        tiny_examples,
        tiny_tokenizer,
        tmp_path / "ex",
        parameters={**EXAMPLE_PARAMETERS, "next_sentence": False},
    )
    checkpoint, history, metrics = pretrain_bert(
        shards, tiny_tokenizer, tiny_params(tmp_path, objective="ltr", max_steps=4)
    )
    assert checkpoint["config"]["is_decoder"] is True
    assert {"val/ltr_loss", "val/ltr_accuracy"} <= set(metrics) and "val/mlm_loss" not in metrics
    assert "val/nsp_accuracy" not in metrics
    logged = set(history["metric"])
    assert "train/ltr_loss" in logged and "train/nsp_loss" not in logged
    # the held-out loss is the mean next-token cross-entropy of the exported model
    model = model_from_checkpoint(checkpoint, BertForPreTraining)
    table = ExampleTable(tiny_examples)
    data = datamodule(tiny_tokenizer, table, next_token=True, seed=TrainingConfig().seed)
    rows = [table.row(int(i)) for i in data.val_indices]
    batch = data.collate((BatchRequest(seed=0, indices=[]), rows))
    with torch.no_grad():
        out = model(**{k: batch[k] for k in BATCH_KEYS if k != "next_sentence_label"})
    assert abs(out.mlm_loss.item() - metrics["val/ltr_loss"]) < 1e-3


def test_left_to_right_needs_examples_without_next_sentence_pairs(
    tmp_path, tiny_tokenizer, tiny_shards
):
    from bert_pipeline.pipelines.pretrain_model.nodes import pretrain_bert

    with pytest.raises(
        ValueError,
        match=r"objective=ltr is the paper's LTR & No NSP: .*"
        r"pretrain_data.examples.next_sentence=false",
    ):
        pretrain_bert(tiny_shards, tiny_tokenizer, tiny_params(tmp_path, objective="ltr"))
    assert not (tmp_path / "ckpt").exists()


def test_left_to_right_settings_that_would_be_ignored_are_refused(
    tmp_path, tiny_tokenizer, tiny_examples
):
    with pytest.raises(
        ConfigError, match=r"masking='dynamic' cannot be dynamic with objective ltr"
    ):
        tiny_config(tmp_path, objective="ltr", masking="dynamic")
    with pytest.raises(ConfigError, match=r"makes a left-to-right model .*objective='mlm'"):
        run_training(
            tiny_examples,
            tiny_tokenizer,
            tiny_config(tmp_path, model_overrides={"is_decoder": True}),
        )
    with pytest.raises(ConfigError, match=r"sets head_lstm_size, a fine-tuning head"):
        run_training(
            tiny_examples,
            tiny_tokenizer,
            tiny_config(tmp_path, model_overrides={"head_lstm_size": 4}),
        )
    assert not (tmp_path / "ckpt").exists()


def test_kept_checkpoints_are_every_checkpoint_of_the_run(tmp_path, tiny_tokenizer, tiny_examples):
    run_training(tiny_examples, tiny_tokenizer, tiny_config(tmp_path, keep_checkpoints=True))
    kept = sorted(p.name for p in (tmp_path / "ckpt").glob("step-*.ckpt"))
    assert kept == ["step-3.ckpt", "step-6.ckpt"]
    run_training(tiny_examples, tiny_tokenizer, tiny_config(tmp_path / "one"))
    assert [p.name for p in (tmp_path / "one" / "ckpt").glob("step-*.ckpt")] == ["step-6.ckpt"]
