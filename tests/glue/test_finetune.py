"""The training loop on a tiny model: grid selection, determinism, outputs, MNLI init wiring."""

from __future__ import annotations

import logging
import os
import signal
import statistics

import numpy as np
import pandas as pd
import pytest
import torch

from bert_pipeline.glue.config import GlueConfig
from bert_pipeline.glue.features import GlueFeatures, encode_table
from bert_pipeline.glue.finetune import finetune_task, predict, tokenizer_from_checkpoint
from bert_pipeline.glue.loading import load_glue_tsv_task
from bert_pipeline.glue.tasks import get_task
from bert_pipeline.model import BertForSequenceClassification
from bert_pipeline.model.checkpoint import model_from_checkpoint
from bert_pipeline.pipelines.finetune_glue.pipeline import create_pipeline
from bert_pipeline.schemas.glue import predictions_schema
from bert_pipeline.training.core import StoppedBySignal
from tests.glue.helpers import tiny_checkpoint, write_glue_tsv


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = write_glue_tsv(tmp_path_factory.mktemp("glue"), tasks=["mnli"])
    return load_glue_tsv_task(root, "mnli")


def _run(data, checkpoint, config):
    task = get_task("mnli")
    dev = pd.concat([data["dev_matched"], data["dev_mismatched"]], ignore_index=True)
    test = pd.concat([data["test_matched"], data["test_mismatched"]], ignore_index=True)
    return finetune_task(task, data["train"], dev, test, checkpoint, config)


def _one_trial(**overrides) -> GlueConfig:
    """One epoch of one trial of a tiny model."""
    return GlueConfig(
        learning_rates=[1e-3],
        seeds=[1],
        batch_size=8,
        epochs=1,
        max_seq_length=32,
        progress_bar=False,
        **overrides,
    )


def _two_trials(**overrides) -> GlueConfig:
    """Two learning rates, one seed (unless overridden), two epochs of a tiny model."""
    return GlueConfig(
        **{
            "learning_rates": [1e-3, 1e-4],
            "seeds": [1],
            "batch_size": 8,
            "epochs": 2,
            "max_seq_length": 32,
            "progress_bar": False,
            **overrides,
        }
    )


def test_grid_picks_the_best_trial_and_is_deterministic(data):
    checkpoint = tiny_checkpoint()
    config = _two_trials()
    result = _run(data, checkpoint, config)
    assert [t["learning_rate"] for t in result.trials] == [1e-3, 1e-4]
    assert all(len(t["history"]) == 2 for t in result.trials)
    best = max(result.trials, key=lambda t: t["best_score"])
    assert result.best["learning_rate"] == best["learning_rate"]
    assert set(result.dev_metrics) == {"dev_matched", "dev_mismatched"}
    predictions_schema(get_task("mnli")).validate(result.dev_predictions)
    predictions_schema(get_task("mnli")).validate(result.test_predictions)
    assert len(result.test_predictions) == 10
    again = _run(data, checkpoint, config)
    pd.testing.assert_frame_equal(result.dev_predictions, again.dev_predictions)
    assert result.dev_metrics == again.dev_metrics
    model = model_from_checkpoint(result.checkpoint, BertForSequenceClassification)
    assert model.num_labels == 3
    tokenizer = tokenizer_from_checkpoint(checkpoint, "tiny", lowercase=True)
    for split in ("dev_matched", "dev_mismatched"):  # kept predictions = the saved model's
        frame = data[split]
        features = GlueFeatures(encode_table(tokenizer, frame, 32), frame["label"], False)
        kept = result.dev_predictions.query("split == @split")["prediction"].tolist()
        assert predict(model, get_task("mnli"), features, 64).tolist() == kept
    assert result.checkpoint["config"]["id2label"]["2"] == "contradiction"
    assert set(result.checkpoint["tokenizer_files"]) == set(checkpoint["tokenizer_files"])


def test_a_train_holdout_chooses_and_dev_is_only_reported(data, caplog):
    """selection_holdout: the trial and epoch with the best score on held-out train rows win;
    dev is measured at that choice and never decides it, and the logs say which chose."""
    from bert_pipeline.glue.tasks import HOLDOUT

    with caplog.at_level(logging.INFO, logger="bert_pipeline.training.finetune"):
        result = _run(data, tiny_checkpoint(), _two_trials(selection_holdout=0.25))
    trials = [r.getMessage() for r in caplog.records if ": best " in r.getMessage()]
    assert len(trials) == 2 and all(f"best {HOLDOUT} score" in m for m in trials)
    history = {t["learning_rate"]: t["history"] for t in result.trials}
    scores = {
        (lr, h["epoch"]): sum(h["metrics"][HOLDOUT].values()) / len(h["metrics"][HOLDOUT])
        for lr, hs in history.items()
        for h in hs
    }
    lr, epoch = max(scores, key=scores.get)  # ties: the earlier trial and epoch (max keeps it)
    assert (result.best["learning_rate"], result.best["best_epoch"]) == (lr, epoch)
    assert set(result.dev_metrics) == {"dev_matched", "dev_mismatched"}
    assert set(result.selected_on) == {HOLDOUT}
    chosen = history[lr][epoch]["metrics"]
    assert result.dev_metrics == {k: v for k, v in chosen.items() if k != HOLDOUT}
    assert len(result.dev_predictions) == len(data["dev_matched"]) + len(data["dev_mismatched"])
    with pytest.raises(ValueError, match="finetune_glue.defaults.selection_holdout"):
        from bert_pipeline.glue.config import glue_params

        glue_params({"defaults": {"selection_holdout": 1.0}}).task_config("rte")


def test_a_refit_trains_the_chosen_rate_again_on_all_of_train(data, monkeypatch):
    """refit: the rate whose trials scored best on the hold-out on average trains again, each
    seed on all of train and stopped at the epoch its trial chose; the delivered model and the
    dev metrics are the refit's, and dev chose nothing."""
    from bert_pipeline.glue import finetune
    from bert_pipeline.glue.tasks import HOLDOUT

    trained_rows = []
    module = finetune.FinetuneDataModule

    def spy(train, *args):
        trained_rows.append(len(train))
        return module(train, *args)

    monkeypatch.setattr(finetune, "FinetuneDataModule", spy)
    # one epoch: the kept epoch and the stop are the next test's
    config = _two_trials(seeds=[1, 2], epochs=1, selection_holdout=0.25, refit=True)
    result = _run(data, tiny_checkpoint(), config)
    n = len(data["train"])
    assert trained_rows == [n - round(0.25 * n)] * 4 + [n] * 2
    assert result.trained_on == n
    mean = {
        lr: sum(t["best_score"] for t in result.trials if t["learning_rate"] == lr)
        for lr in (1e-3, 1e-4)
    }
    rate = max(mean, key=mean.get)
    chosen = {t["seed"]: t for t in result.trials if t["learning_rate"] == rate}
    assert [(r["learning_rate"], r["seed"]) for r in result.refits] == [(rate, 1), (rate, 2)]
    for r in result.refits:
        assert r["epoch"] == chosen[r["seed"]]["best_epoch"]
        assert len(r["history"]) == r["epoch"] + 1  # stopped after the kept epoch
        assert all(HOLDOUT not in h["metrics"] for h in r["history"])
    best = max(chosen.values(), key=lambda t: t["best_score"])
    assert (result.best["seed"], result.best["best_score"]) == (best["seed"], best["best_score"])
    assert result.selected_on == {HOLDOUT: best["history"][best["best_epoch"]]["metrics"][HOLDOUT]}
    kept = next(r for r in result.refits if r["seed"] == best["seed"])
    assert result.dev_metrics == kept["history"][kept["epoch"]]["metrics"]
    model = model_from_checkpoint(result.checkpoint, BertForSequenceClassification)
    tokenizer = tokenizer_from_checkpoint(tiny_checkpoint(), "tiny", lowercase=True)
    frame = data["dev_matched"]
    features = GlueFeatures(encode_table(tokenizer, frame, 32), frame["label"], False)
    kept_preds = result.dev_predictions.query("split == 'dev_matched'")["prediction"].tolist()
    assert predict(model, get_task("mnli"), features, 64).tolist() == kept_preds
    with pytest.raises(ValueError, match="finetune_glue.defaults.refit"):
        from bert_pipeline.glue.config import glue_params

        glue_params({"defaults": {"refit": True}}).task_config("rte")


def _refit_build(data):
    """(a refit's `build` of a tiny MNLI classifier scored on dev_matched, its encoded train)."""
    from bert_pipeline.glue.finetune import build_classifier, encode
    from bert_pipeline.glue.module import GlueModule
    from bert_pipeline.training.finetune import FinetuneDataModule

    task, checkpoint = get_task("mnli"), tiny_checkpoint()
    tokenizer = tokenizer_from_checkpoint(checkpoint, "tiny", lowercase=True)
    train = encode(task, tokenizer, data["train"], 32)
    dev = [encode(task, tokenizer, data["dev_matched"], 32)]

    def build(trial):
        model = build_classifier(checkpoint, task, "tiny", trial.seed)
        loaders = FinetuneDataModule(train, dev, None, 8, 64, trial.seed)
        return GlueModule(model, task, ["dev_matched"], trial), loaders

    return build, train


def test_a_refit_stops_after_its_trials_epoch_on_the_whole_schedule(data):
    """Each refit keeps the epoch its trial chose and stops there, its learning rate still
    on the schedule of all `epochs` (not decayed to zero at the kept epoch)."""
    from bert_pipeline.training.finetune import refit

    build, train = _refit_build(data)

    def trial(lr, seed, epoch, score):
        return {"learning_rate": lr, "seed": seed, "best_epoch": epoch, "best_score": score}

    trials = [trial(1e-3, 1, 2, 0.9), trial(1e-3, 2, 2, 0.1), trial(1e-4, 1, 0, 0.6)]
    trials.append(trial(1e-4, 2, 1, 0.7))  # 1e-4: the best mean (0.65 > 0.5), seed 2 its best
    config = _two_trials(seeds=[1, 2], epochs=3)
    fitted = refit("mnli", config, build, trials)
    assert [(r["learning_rate"], r["seed"], r["epoch"]) for r in fitted.trials] == [
        (1e-4, 1, 0),
        (1e-4, 2, 1),
    ]
    assert [len(r["history"]) for r in fitted.trials] == [1, 2]
    assert fitted.best is trials[3] and fitted.module.best_epoch == 1
    assert fitted.dev_metrics == fitted.trials[1]["history"][1]["metrics"]
    steps = -(-len(train) // 8)
    assert fitted.trainer.global_step == 2 * steps
    assert fitted.trainer.estimated_stepping_batches == 3 * steps
    warmup = int(0.1 * 3 * steps)  # then linear decay to 0 at the end of epoch 3
    expected = 1e-4 * (3 * steps - 2 * steps) / (3 * steps - warmup)
    assert fitted.module.lr_schedulers().get_last_lr()[0] == pytest.approx(expected)


def test_several_holdouts_choose_on_their_pooled_scores(data, caplog, monkeypatch):
    """holdouts: the grid runs once per hold-out, each holding its own rows out; the (dropout,
    rate) with the best mean over every hold-out's trials is refit, each seed stopped at the
    median of the epochs its trials chose, and the seed with the best mean delivers the model."""
    from bert_pipeline.glue import finetune
    from bert_pipeline.glue.tasks import HOLDOUT
    from bert_pipeline.training.selection import best_mean_rate

    encoded = []
    encode = finetune.encode

    def spy(task, tokenizer, frame, length):
        encoded.append(frame)
        return encode(task, tokenizer, frame, length)

    monkeypatch.setattr(finetune, "encode", spy)
    config = _two_trials(
        seeds=[1, 2],
        epochs=3,
        selection_holdout=0.25,
        holdout_seed=4,
        holdouts=3,
        refit=True,
        dropout=[0.1, 0.0],
    )
    with caplog.at_level(logging.INFO, logger="bert_pipeline.training.finetune"):
        result = _run(data, tiny_checkpoint(), config)
    draws = [finetune._hold_out(get_task("mnli"), data["train"], 0.25, s) for s in (4, 5, 6)]
    held = [set(f["idx"]) for f in encoded if (f["split"] == HOLDOUT).all()]
    assert held == [set(h["idx"]) for _, h in draws] and len({frozenset(h) for h in held}) == 3
    trained = [f for f in encoded if (f["split"] == "train").all() and len(f) < len(data["train"])]
    assert [set(f["idx"]) for f in trained] == [set(t["idx"]) for t, _ in draws]
    logged = [r.getMessage().split(":")[0] for r in caplog.records if ": best " in r.getMessage()]
    assert logged[0] == "mnli holdout_4_dropout_0.1_lr_0.001_seed_1" and len(logged) == 24
    assert [t["holdout_seed"] for t in result.trials] == [4] * 8 + [5] * 8 + [6] * 8

    chosen = best_mean_rate(result.trials)  # over every hold-out's trials
    tag, rate = chosen[0]["tag"], chosen[0]["learning_rate"]
    assert {t["holdout_seed"] for t in chosen} == {4, 5, 6}
    epochs = {s: sorted(t["best_epoch"] for t in chosen if t["seed"] == s) for s in (1, 2)}
    assert [(r["tag"], r["learning_rate"], r["seed"]) for r in result.refits] == [
        (tag, rate, 1),
        (tag, rate, 2),
    ]
    assert {r["seed"]: r["epoch"] for r in result.refits} == {s: e[1] for s, e in epochs.items()}
    by_seed = {
        s: statistics.fmean(t["best_score"] for t in chosen if t["seed"] == s) for s in (1, 2)
    }
    seed = max(by_seed, key=by_seed.get)
    assert result.best == {
        "tag": tag,
        "learning_rate": rate,
        "seed": seed,
        "best_epoch": epochs[seed][1],
        "best_score": by_seed[seed],
        "dropout": {"dropout_0.1": 0.1, "dropout_0": 0.0}[tag],
    }
    at_choice = [
        t["history"][t["best_epoch"]]["metrics"][HOLDOUT] for t in chosen if t["seed"] == seed
    ]
    assert result.selected_on == {
        HOLDOUT: {k: statistics.fmean(m[k] for m in at_choice) for k in at_choice[0]}
    }
    kept = next(r for r in result.refits if r["seed"] == seed)
    assert result.dev_metrics == kept["history"][kept["epoch"]]["metrics"]
    assert result.trained_on == len(data["train"])


@pytest.mark.parametrize(
    ("defaults", "bad"),
    [
        ({"selection_holdout": 0.1, "holdouts": 3}, "holdouts=3"),
        ({"selection_holdout": 0.1, "holdouts": 0, "refit": True}, "holdouts=0"),
        ({"selection_holdout": 0.1, "holdout_seed": -1}, "holdout_seed=-1"),
        ({"seeds": [1, 1]}, "seeds"),
    ],
)
def test_holdout_parameters_are_checked(defaults, bad):
    from bert_pipeline.glue.config import glue_params

    with pytest.raises(ValueError, match=f"finetune_glue.defaults.{bad}"):
        glue_params({"defaults": defaults}).task_config("rte")


def test_a_refit_over_several_holdouts_pools_each_seeds_trials(data):
    """Trials of three hold-outs: the rate is chosen on all of them (hold-out 0 alone would
    choose the other); each seed stops at the median of its epochs, the best mean seed delivers."""
    from bert_pipeline.training.finetune import _pooled, refit

    build, _ = _refit_build(data)

    scores = {  # (lr, seed): [(epoch, score) on hold-outs 0, 1, 2]
        (1e-3, 1): [(2, 0.9), (2, 0.1), (2, 0.1)],
        (1e-3, 2): [(2, 0.9), (2, 0.1), (2, 0.1)],
        (1e-4, 1): [(2, 0.5), (0, 0.6), (1, 0.7)],
        (1e-4, 2): [(0, 0.6), (2, 0.7), (2, 0.65)],
    }
    trials = [
        {"learning_rate": lr, "seed": seed, "best_epoch": e, "best_score": v, "holdout_seed": h}
        for h in range(3)
        for (lr, seed), by_holdout in scores.items()
        for e, v in [by_holdout[h]]
    ]
    config = _two_trials(seeds=[1, 2], epochs=3)
    fitted = refit("mnli", config, build, trials)
    assert [(r["learning_rate"], r["seed"], r["epoch"]) for r in fitted.trials] == [
        (1e-4, 1, 1),
        (1e-4, 2, 2),
    ]
    assert [len(r["history"]) for r in fitted.trials] == [2, 3]
    assert fitted.best == {
        "learning_rate": 1e-4,
        "seed": 2,
        "best_epoch": 2,
        "best_score": pytest.approx(0.65),
    }
    assert fitted.module.best_epoch == 2
    assert fitted.dev_metrics == fitted.trials[1]["history"][2]["metrics"]
    two = [{**trials[0], "best_epoch": e} for e in (1, 0)]  # of two epochs, the lower
    assert _pooled(two)["best_epoch"] == 0


def test_a_phrase_holdout_holds_out_whole_sentences():
    """SST-2's train holds each sentence and its phrases: the hold-out draws sentences, scores
    only them (dev holds sentences), and trains on none of their phrases, which carry their
    label; a task without phrases draws rows as before."""
    from bert_pipeline.glue.finetune import _hold_out

    sentences = [f"w{i}a w{i}b w{i}c w{i}d" for i in range(40)]
    phrases = [p for s in sentences for p in (s.rsplit(" ", 1)[0], s.split(" ", 2)[2])]
    texts = phrases[:40] + sentences + phrases[40:]  # the order of the file does not matter
    train = pd.DataFrame({"text_a": texts, "text_b": None, "label": [i % 2 for i in range(120)]})
    rest, held = _hold_out(get_task("sst2"), train, 0.1, 3)
    assert len(held) == 4 and set(held["text_a"]) <= set(sentences)
    held_sentence = {t.split()[0][:-1] for t in held["text_a"]}  # "w7a" -> "w7"
    trained_sentence = {t.split()[0][:-1] for t in rest["text_a"]}
    assert not held_sentence & trained_sentence
    assert len(rest) == len(train) - 4 * 3  # each held sentence takes its two phrases along
    assert set(held["split"]) == {"train_holdout"}

    rest_rows, held_rows = _hold_out(get_task("cola"), train, 0.1, 3)
    assert len(held_rows) == 12 and len(rest_rows) == len(train) - 12  # rows, not sentences
    with pytest.raises(ValueError, match="selection_holdout=0.01 of 40 train sentences"):
        _hold_out(get_task("sst2"), train, 0.01, 0)


def test_a_classification_holdout_keeps_the_label_shares_of_train():
    """A classification task's hold-out is drawn per label, so every draw holds train's label
    shares (a plain draw's lean to one label rewards trials that lean the same way); a
    regression task's is a plain draw of rows."""
    from bert_pipeline.glue.finetune import _hold_out

    labels = np.random.default_rng(0).permutation([1] * 140 + [0] * 60)
    train = pd.DataFrame({"text_a": [f"s{i}" for i in range(200)], "label": labels})
    plain = [train.sample(frac=0.1, random_state=s)["label"].sum() for s in range(10)]
    assert set(plain) != {14}  # some plain draws lean: the case stratifying removes
    for seed in range(10):
        rest, held = _hold_out(get_task("cola"), train, 0.1, seed)
        assert held["label"].value_counts().to_dict() == {1: 14, 0: 6}
        assert sorted([*rest["text_a"], *held["text_a"]]) == sorted(train["text_a"])
    scores = train.assign(label=np.linspace(0.0, 5.0, 200))
    _, held = _hold_out(get_task("stsb"), scores, 0.1, 3)
    assert held["text_a"].tolist() == scores.sample(frac=0.1, random_state=3)["text_a"].tolist()


def test_mean_pooling_travels_with_the_fine_tuned_model(data):
    checkpoint = tiny_checkpoint()
    result = _run(data, checkpoint, _one_trial(classifier_pooling="mean"))
    assert result.checkpoint["config"]["classifier_pooling"] == "mean"
    assert not any(k.startswith("bert.pooler.") for k in result.checkpoint["state_dict"])
    model = model_from_checkpoint(result.checkpoint, BertForSequenceClassification)
    assert model.bert.pooler is None
    frame = data["dev_matched"]
    tokenizer = tokenizer_from_checkpoint(checkpoint, "tiny", lowercase=True)
    features = GlueFeatures(encode_table(tokenizer, frame, 32), frame["label"], False)
    kept = result.dev_predictions.query("split == 'dev_matched'")["prediction"].tolist()
    assert predict(model, get_task("mnli"), features, 64).tolist() == kept


def test_a_sigterm_during_the_test_predictions_fails_the_task(data, monkeypatch):
    """Lightning's predict loop only notes a SIGTERM and runs on: the run stops after the batch."""
    from bert_pipeline.glue.module import GlueModule

    predicted, step = [], GlueModule.predict_step

    def sigterm_in_first_batch(self, batch, batch_idx):
        predicted.append(batch_idx)
        if batch_idx == 0:
            os.kill(os.getpid(), signal.SIGTERM)
        return step(self, batch, batch_idx)

    monkeypatch.setattr(GlueModule, "predict_step", sigterm_in_first_batch)
    handler = signal.getsignal(signal.SIGTERM)
    stopped = "^prediction stopped by SIGTERM: the task's results were not saved$"
    with pytest.raises(StoppedBySignal, match=stopped):
        _run(data, tiny_checkpoint(), _one_trial(eval_batch_size=4))  # 10 test rows: 3 batches
    assert predicted == [0]
    assert signal.getsignal(signal.SIGTERM) == handler, "Lightning's handler outlived predict"


def test_fine_tuning_dropout_replaces_the_checkpoints_and_travels_with_the_model(data):
    """`dropout` sets every dropout of the encoder and the head (the checkpoint's 0.1 otherwise),
    and the saved config records the rate the model was trained with."""
    from bert_pipeline.glue.finetune import build_classifier

    task, checkpoint = get_task("mnli"), tiny_checkpoint()

    def rates(model):
        layers = {m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)}
        return layers, {m.dropout_p for m in model.modules() if hasattr(m, "dropout_p")}

    assert rates(build_classifier(checkpoint, task, "tiny", 1)) == ({0.1}, {0.1})
    assert rates(build_classifier(checkpoint, task, "tiny", 1, dropout=0.0)) == ({0.0}, {0.0})
    result = _run(data, checkpoint, _one_trial(dropout=0.0))
    assert result.checkpoint["config"]["hidden_dropout_prob"] == 0.0
    assert result.checkpoint["config"]["attention_probs_dropout_prob"] == 0.0


def test_a_dropout_grid_is_one_run_per_rate_chosen_jointly_with_the_lr(data):
    """A list of `dropout` rates is a grid axis: each trial equals the one of a run at that
    rate alone (same seeds, same hold-out rows), the (dropout, lr) whose trials scored best on
    the hold-out on average is refit, and the model's config records the rate it trained with."""
    checkpoint = tiny_checkpoint()
    common = {"seeds": [1, 2], "epochs": 1, "selection_holdout": 0.25}
    grid = _run(data, checkpoint, _two_trials(**common, dropout=[0.1, 0.0], refit=True))
    alone = {
        rate: _run(data, checkpoint, _two_trials(**common, dropout=rate)).trials
        for rate in (0.1, 0.0)
    }
    assert [(t["tag"], t["dropout"]) for t in grid.trials] == [("dropout_0.1", 0.1)] * 4 + [
        ("dropout_0", 0.0)
    ] * 4
    for t in grid.trials:
        (same,) = [
            a
            for a in alone[t["dropout"]]
            if (a["learning_rate"], a["seed"]) == (t["learning_rate"], t["seed"])
        ]
        assert t["history"] == same["history"]
    mean = {}
    for t in grid.trials:
        mean.setdefault((t["dropout"], t["learning_rate"]), []).append(t["best_score"])
    rate, lr = max(mean, key=lambda k: sum(mean[k]))
    assert {(r["dropout"], r["learning_rate"]) for r in grid.refits} == {(rate, lr)}
    assert (grid.best["dropout"], grid.best["learning_rate"]) == (rate, lr)
    assert grid.checkpoint["config"]["hidden_dropout_prob"] == rate
    assert grid.checkpoint["config"]["attention_probs_dropout_prob"] == rate


def test_mnli_init_wiring():
    pipe = create_pipeline(tasks=["mnli", "rte", "stsb"], init_from_mnli=["rte"])
    inputs = {n.name: set(n.inputs) for n in pipe.nodes}
    assert "mnli.glue_model" in inputs["rte.finetune_task"]
    assert "glue_pretrained_model" in inputs["stsb.finetune_task"]
    assert "glue_pretrained_model" in inputs["mnli.finetune_task"]
    assert {n.namespace for n in pipe.nodes} == {"mnli", "rte", "stsb", None}


@pytest.mark.parametrize("head", [{"classifier_pooling": "last"}, {"head_lstm_size": 8}])
def test_a_left_to_right_encoder_fine_tunes_causal_with_its_head(data, head):
    """Table 5's LTR rows: the causal mask is kept at fine-tuning (config.json's is_decoder),
    the classifier reads the last token or a BiLSTM, and the result is deterministic."""
    checkpoint = tiny_checkpoint(is_decoder=True)
    config = _one_trial(**head)
    result = _run(data, checkpoint, config)
    saved = result.checkpoint["config"]
    assert saved["is_decoder"] is True
    assert saved.get("head_lstm_size") == head.get("head_lstm_size")
    assert _run(data, checkpoint, config).dev_metrics == result.dev_metrics


def test_a_task_from_the_mnli_model_reads_what_mnli_read():
    from bert_pipeline.glue.config import glue_params
    from bert_pipeline.params import ConfigError

    params = glue_params(
        {
            "tasks": ["mnli", "rte"],
            "init_from_mnli": ["rte"],
            "defaults": {"classifier_pooling": "mean"},
            "hyperparameters": {"mnli": {"head_lstm_size": 8}},
        }
    )
    with pytest.raises(
        ConfigError, match=r"hyperparameters.rte.head_lstm_size=None but init_from_mnli"
    ):
        params.task_configs(["mnli", "rte"])
