"""SQuAD: reading (files, `datasets`), bad input, doc-stride windows, the answer search, the
official measures, and fine-tuning on the shared core (v1.1 and v2.0)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bert_pipeline.io.squad_dataset import SquadDataset
from bert_pipeline.model.checkpoint import tokenizer_from_checkpoint
from bert_pipeline.schemas.squad import questions
from bert_pipeline.squad.config import SquadConfig
from bert_pipeline.squad.data import SquadDataError, read_squad, table_from_hf
from bert_pipeline.squad.evaluation import best_answers, normalize_answer, squad_metrics
from bert_pipeline.squad.features import build_windows
from bert_pipeline.squad.finetune import finetune_squad
from bert_pipeline.training.config import ConfigError
from tests.glue.helpers import tiny_checkpoint
from tests.squad.helpers import squad_document, write_squad_folder


@pytest.fixture(scope="module")
def checkpoint():
    texts = []
    for article in squad_document(20, "vocab", True)["data"]:
        for p in article["paragraphs"]:
            texts += [p["context"], *(q["question"] for q in p["qas"])]
    return tiny_checkpoint(texts)


def test_v1_and_v2_files_read_and_validate(tmp_path):
    v1 = SquadDataset(
        path=str(write_squad_folder(tmp_path / "v1")),
        files={"train": "train.json", "dev": "dev.json"},
    ).load()
    assert {k: len(v) for k, v in v1.items()} == {"train": 96, "dev": 36}
    assert not v1["train"]["is_impossible"].any()
    v2 = read_squad(write_squad_folder(tmp_path / "v2", version_2=True) / "dev.json")
    questions.validate(v2)
    assert (
        v2["is_impossible"].sum() == 9
        and (v2[v2["is_impossible"]]["answer_texts"].map(len) == 0).all()
    )
    row = v1["dev"].iloc[0]
    start, text = row["answer_starts"][0], row["answer_texts"][0]
    assert row["context"][start : start + len(text)] == text


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda qa: qa["answers"][0].update(answer_start=3),
            r"bad.json: question 'q0-0': answer .* is not at character 3",
        ),
        (lambda qa: qa.update(question="  "), r"bad.json: question 'q0-0' is empty"),
        (lambda qa: qa.update(answers=[]), r"bad.json: question 'q0-0' has no answer"),
        (lambda qa: qa.update(id="q0-1"), r"bad.json: question id 'q0-1' appears twice"),
        (lambda qa: qa.pop("question"), r"bad.json: question 'q0-0' is malformed .*'question'"),
        (lambda qa: qa.update(question=None), r"bad.json: question 'q0-0' is empty"),
        (
            lambda qa: qa["answers"][0].pop("answer_start"),
            r"bad.json: question 'q0-0' is malformed .*'answer_start'",
        ),
    ],
)
def test_bad_questions_name_the_file_and_id(tmp_path, change, message):
    document = squad_document(1, "x")
    change(document["data"][0]["paragraphs"][0]["qas"][0])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    with pytest.raises(SquadDataError, match=message):
        read_squad(path)


def test_hf_layout_through_datasets(tmp_path):
    files = SquadDataset(
        path=str(write_squad_folder(tmp_path / "j", version_2=True)),
        files={"train": "train.json", "dev": "dev.json"},
    ).load()
    hub = tmp_path / "hub"
    hub.mkdir()
    for split, name in (("train", "train"), ("dev", "validation")):
        frame = files[split]
        rows = pd.DataFrame(
            {
                "id": frame["id"],
                "title": frame["title"],
                "context": frame["context"],
                "question": frame["question"],
                "answers": [
                    {"text": t, "answer_start": s}
                    for t, s in zip(frame["answer_texts"], frame["answer_starts"], strict=True)
                ],
            }
        )
        rows.to_parquet(hub / f"{name}-00000-of-00001.parquet")
    loaded = SquadDataset(source="hf", hf_data_dir=str(hub)).load()
    for split in ("train", "dev"):
        pd.testing.assert_frame_equal(loaded[split], files[split], check_dtype=False)


def test_a_repeated_id_in_hf_rows_names_it():
    row = {
        "id": "a1",
        "title": "t",
        "context": "Mara sailed north.",
        "question": "Who sailed?",
        "answers": {"text": ["Mara"], "answer_start": [0]},
    }
    with pytest.raises(SquadDataError, match=r"hub:dev: question id 'a1' appears twice"):
        table_from_hf(pd.DataFrame([row, row]), "hub:dev")


def test_windows_share_doc_stride_tokens_and_carry_the_answer(checkpoint, tmp_path):
    tokenizer = tokenizer_from_checkpoint(checkpoint, "tiny", lowercase=True)
    frame = read_squad(write_squad_folder(tmp_path, sizes={"dev": 2}) / "dev.json")
    frame.loc[0, "context"] = " ".join([frame.loc[0, "context"]] * 4)  # a long context
    windows = build_windows(tokenizer, frame, max_seq_length=40, doc_stride=8, max_query_length=16)
    first = [w for w in windows if w.example == 0]
    assert len(first) > 2
    for a, b in zip(first, first[1:], strict=False):
        ctx_a = [o for o in a.offsets if o is not None]
        ctx_b = [o for o in b.offsets if o is not None]
        assert ctx_a[-8:] == ctx_b[:8]  # consecutive windows share doc_stride tokens
    for w in windows:
        assert len(w.input_ids) <= 40
        row = frame.iloc[w.example]
        if w.start:
            s, e = w.offsets[w.start][0], w.offsets[w.end][1]
            assert normalize_answer(row["context"][s:e]) == normalize_answer(row["answer_texts"][0])
    answered = {w.example for w in windows if w.start}
    assert answered == set(range(len(frame)))  # every answer lies wholly in some window


def test_answer_search_and_official_measures():
    frame = pd.DataFrame(
        {"id": ["a"], "context": ["Ida Fenn went to Kelbridge."], "answer_texts": [["Kelbridge"]]}
    )

    class W:
        example, offsets = 0, [None, None, (0, 3), (4, 8), (9, 13), (14, 16), (17, 26), None]

    start = np.array([9.0, 0, 0, 0, 0, 0, 5, 0])
    end = np.array([9.0, 0, 0, 0, 0, 0, 5, 0])
    answers, null = best_answers(frame, [W()], [start], [end], n_best_size=20, max_answer_length=30)
    assert answers == {"a": "Kelbridge"} and null == {"a": 8.0}  # [CLS] is never a span
    assert normalize_answer("The  Tarsen, Union!") == "tarsen union"
    golds = pd.DataFrame(
        {
            "id": ["1", "2", "3"],
            "answer_texts": [["Port Ilsun"], ["the Velmar Bank"], []],
            "is_impossible": [False, False, True],
        }
    )
    v1, _ = squad_metrics(golds.iloc[:2], {"1": "Port Ilsun", "2": "Velmar Bank branch"})
    assert v1["exact_match"] == pytest.approx(50.0)
    assert v1["f1"] == pytest.approx(100 * (1 + 0.8) / 2)  # 2/3 precision, 1 recall -> 0.8
    answers = {"1": "Port Ilsun", "2": "Velmar", "3": "Kelbridge"}
    v2, final = squad_metrics(golds, answers, {"1": -5.0, "2": 1.0, "3": 2.0})
    assert final == {"1": "Port Ilsun", "2": "Velmar", "3": ""}  # best threshold: 1.0
    assert v2["null_threshold"] == 1.0 and v2["NoAns_exact_match"] == 100.0
    assert v2["HasAns_exact_match"] == 50.0
    fixed, final = squad_metrics(golds, answers, {"1": -5.0, "2": 1.0, "3": 2.0}, threshold=3.0)
    assert final["3"] == "Kelbridge" and fixed["NoAns_exact_match"] == 0.0


def _config(**extra) -> SquadConfig:
    return SquadConfig(
        learning_rates=[1e-3],
        seeds=[2],
        epochs=2,
        batch_size=8,
        max_seq_length=48,
        doc_stride=8,
        max_query_length=16,
        progress_bar=False,
        **extra,
    )


def test_finetuning_v2_is_deterministic_with_no_answer_scores(checkpoint, tmp_path):
    root = write_squad_folder(tmp_path, version_2=True, sizes={"train": 4, "dev": 2})
    train, dev = read_squad(root / "train.json"), read_squad(root / "dev.json")
    result = finetune_squad(train, dev, checkpoint, _config())
    again = finetune_squad(train, dev, checkpoint, _config())
    assert result.predictions == again.predictions
    assert result.record["version"] == "2.0"
    metrics = result.record["dev_metrics"]
    assert {"exact_match", "f1", "HasAns_f1", "NoAns_f1", "best_f1_threshold"} <= set(metrics)
    assert set(result.predictions) == set(dev["id"]) == set(result.null_odds)
    assert result.checkpoint["config"]["architectures"] == ["BertForQuestionAnswering"]


def test_bad_parameters_are_named():
    with pytest.raises(ConfigError, match=r"finetune_squad.training.max_seq_length=64 must exceed"):
        SquadConfig.from_params({"max_seq_length": 64}, "finetune_squad.training")


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"data": {"max_train": 10}}, r"finetune_squad.data.max_train: Key 'max_train'"),
        ({"training": {"max_seq_length": 64}}, r"finetune_squad.training.max_seq_length=64 must"),
        ({"training": {"lstm_width": 8}}, r"finetune_squad.training.lstm_width: Key 'lstm_width'"),
        ({"trainig": {}}, r"finetune_squad.trainig: Key 'trainig'"),
    ],
)
def test_squad_parameters_are_parsed_whole(params, message):
    from bert_pipeline.squad.config import squad_params

    with pytest.raises(ConfigError, match=message):
        squad_params(params)
    parsed = squad_params({"data": {"max_dev_questions": "5"}, "training": {"epochs": 1}})
    assert parsed.data.max_dev_questions == 5 and parsed.training.epochs == 1


def test_a_bilstm_between_a_left_to_right_encoder_and_the_span_head(tmp_path):
    """Table 5's "+ BiLSTM" row on SQuAD: the BiLSTM's weights travel with the reader."""
    texts = [
        t
        for a in squad_document(20, "vocab", True)["data"]
        for p in a["paragraphs"]
        for t in [p["context"], *(q["question"] for q in p["qas"])]
    ]
    checkpoint = tiny_checkpoint(texts, is_decoder=True)
    root = write_squad_folder(tmp_path, version_2=False, sizes={"train": 4, "dev": 2})
    train, dev = read_squad(root / "train.json"), read_squad(root / "dev.json")
    result = finetune_squad(train, dev, checkpoint, _config(head_lstm_size=8))
    assert result.checkpoint["config"]["head_lstm_size"] == 8
    assert any(k.startswith("head_lstm.") for k in result.checkpoint["state_dict"])
    assert set(result.predictions) == set(dev["id"])


def test_a_bilstm_width_must_be_positive():
    with pytest.raises(ConfigError, match=r"finetune_squad.training.head_lstm_size=0 must be >= 1"):
        SquadConfig.from_params({"head_lstm_size": 0}, "finetune_squad.training")
