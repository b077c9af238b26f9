"""`precision: auto` and `compile: auto`: what each machine gets, with torch's detection mocked
both ways, and a real run on this machine."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from lightning.pytorch import Callback
from torch._dynamo.utils import counters

from bert_pipeline.params import ConfigError
from bert_pipeline.training import hardware
from bert_pipeline.training.config import TrainingConfig
from bert_pipeline.training.hardware import bf16_units, choose, warn_emulated_bf16
from bert_pipeline.training.trainer import run_training
from tests.training.conftest import EXAMPLE_PARAMETERS
from tests.training.test_training import tiny_config, tiny_params


@pytest.fixture
def cpu(monkeypatch):
    """A CPU whose bf16 units and C++ compiler the test sets."""

    def make(amx=False, avx512_bf16=False, compiler="g++"):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
        monkeypatch.delenv("CXX", raising=False)
        monkeypatch.setattr(hardware.shutil, "which", lambda name: compiler and f"/usr/bin/{name}")

    return make


@pytest.mark.parametrize(
    ("units", "expected", "reason"),
    [
        ({"amx": True}, ("bf16-mixed", True), "bf16-mixed: AMX found; torch.compile with g++"),
        ({"avx512_bf16": True}, ("bf16-mixed", True), "bf16-mixed: AVX512-BF16 found"),
        ({}, ("32", False), "fp32: this CPU has no bf16 units"),
        ({"amx": True, "compiler": None}, ("bf16-mixed", False), "no C++ compiler"),
    ],
)
def test_auto_picks_bf16_and_compile_only_where_the_cpu_has_bf16_units(
    cpu, units, expected, reason
):
    cpu(**units)
    choice = choose("auto", "auto", "auto")
    assert (choice.precision, choice.compile) == expected
    assert reason in choice.reason
    assert choice.params() == {
        "precision_chosen": expected[0],
        "compile_chosen": str(expected[1]).lower(),
    }


def test_an_explicit_setting_wins(cpu):
    cpu(amx=True)
    assert (choose("32", False).precision, choose("32", False).compile) == ("32", False)
    cpu()
    assert choose("bf16-mixed", True).precision == "bf16-mixed"
    assert choose("bf16-mixed", True).compile is True


def test_bf16_asked_for_on_a_cpu_without_bf16_units_is_warned_once(cpu, caplog):
    cpu()
    with caplog.at_level(logging.WARNING, logger="bert_pipeline.training.hardware"):
        warn_emulated_bf16("bf16-mixed")
        warn_emulated_bf16("32")
    (record,) = caplog.records
    assert "without bf16 units" in record.getMessage() and "slower than fp32" in record.getMessage()
    cpu(avx512_bf16=True)
    caplog.clear()
    warn_emulated_bf16("bf16-mixed")
    assert not caplog.records


def test_compile_must_be_true_false_or_auto(tmp_path):
    assert tiny_config(tmp_path, compile="auto", precision="auto").compile == "auto"
    with pytest.raises(ConfigError, match="pretrain_model.compile"):
        tiny_config(tmp_path, compile="sometimes")
    with pytest.raises(ConfigError, match="pretrain_model.precision"):
        tiny_config(tmp_path, precision="bf17")


def test_a_real_auto_run_trains_as_this_machine_pays_and_exports_the_architecture(
    tmp_path, tiny_tokenizer, tiny_examples, caplog
):
    """A real run of the budget recipe's settings (`auto` precision and compile, no dropout) on
    this machine: `compile` and `dropout` change how the model trains, never what is exported.
    One run for all of it, as a compile costs one to two minutes of a test worker; on a CPU
    without bf16 units `auto` does not compile, and neither does this test."""
    seen = {}

    class Inspect(Callback):
        def on_validation_start(self, trainer, pl_module):
            seen["graphs"] = counters["stats"]["unique_graphs"]

        def on_validation_end(self, trainer, pl_module):  # validation runs eagerly
            seen["validation graphs"] = counters["stats"]["unique_graphs"] - seen.pop("graphs")

        def on_train_batch_end(self, trainer, pl_module, *args):
            seen["compiled"] = pl_module.model._compiled_call_impl is not None
            seen["dropout"] = {
                m.p for m in pl_module.model.modules() if isinstance(m, torch.nn.Dropout)
            } | {pl_module.model.bert.encoder.layer[0].attention.self.dropout_p}

    # every batch padded to the examples' length, as the hour's are to 128: one compiled graph
    longest = EXAMPLE_PARAMETERS["max_seq_length"]
    cfg = tiny_config(
        tmp_path,
        precision="auto",
        compile="auto",
        dropout=0.0,
        max_steps=3,
        pad_to_multiple_of=longest,
    )
    with caplog.at_level(logging.INFO, logger="bert_pipeline.training.trainer"):
        result = run_training(tiny_examples, tiny_tokenizer, cfg, extra_callbacks=[Inspect()])
    chosen = choose("auto", "auto", "cpu")
    assert chosen.precision == ("bf16-mixed" if bf16_units("cpu") else "32")
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("precision")]
    assert line.startswith(f"precision {chosen.precision}, compile {chosen.compile}")
    assert seen == {"compiled": chosen.compile, "dropout": {0.0}, "validation graphs": 0}
    assert result.metrics["global_step"] == 3
    assert np.isfinite(result.metrics["val/mlm_loss"])
    assert result.model.config.hidden_dropout_prob == 0.1
    assert result.model.config.attention_probs_dropout_prob == 0.1
    with pytest.raises(ConfigError, match="pretrain_model.dropout"):
        tiny_config(tmp_path, dropout=1.0)


def test_the_budget_schedule_follows_the_larger_share_of_steps_or_time():
    from bert_pipeline.training.core import budget_warmup_decay, linear_warmup_decay

    class Clock:
        share = 0.0

        def used(self):
            return self.share

    clock = Clock()
    factor, steps = budget_warmup_decay(10, 100, clock), linear_warmup_decay(10, 100)
    assert [round(factor(s), 6) for s in (0, 5, 10, 55, 100)] == [
        round(steps(s), 6) for s in (0, 5, 10, 55, 100)
    ]
    clock.share = 0.55  # time runs out faster than the steps: the rate follows the time
    assert factor(20) == pytest.approx(0.5)
    clock.share = 1.2
    assert factor(30) == 0.0


def test_a_time_budget_stops_the_run_and_brings_the_rate_down(
    tmp_path, tiny_tokenizer, tiny_examples
):
    params = tiny_params(tmp_path, max_steps=100_000, val_every_n_steps=1_000)
    params["schedule"]["budget_minutes"] = 0.1
    result = run_training(tiny_examples, tiny_tokenizer, TrainingConfig.from_params(params))
    assert 0 < result.metrics["global_step"] < 100_000
    lr = result.history.query("metric == 'train/lr'")["value"]
    assert lr.iloc[-1] < 0.2 * lr.max()
    params["schedule"]["budget_minutes"] = 0
    with pytest.raises(ConfigError, match="pretrain_model.schedule.budget_minutes"):
        TrainingConfig.from_params(params)


def test_freed_memory_is_left_to_the_defaults_on_a_gpu_and_without_glibc(monkeypatch):
    calls = []
    monkeypatch.setattr(hardware.ctypes, "CDLL", lambda name: calls.append(name))
    assert hardware.keep_freed_memory("cuda") is False and calls == []

    def no_glibc(name):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(hardware.ctypes, "CDLL", no_glibc)
    assert hardware.keep_freed_memory("cpu") is False
