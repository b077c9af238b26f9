"""`python -m bert_pipeline.extract_features` (the README's command) on a tiny model: the rows,
the vectors (equal to transformers' hidden states), pairs, and bad input."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest
import torch
from tokenizers import Tokenizer

from bert_pipeline.extract_features import main
from bert_pipeline.model.checkpoint import write_checkpoint
from tests.glue.helpers import tiny_checkpoint


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return write_checkpoint(tiny_checkpoint(), tmp_path_factory.mktemp("m") / "model")


def test_cli_writes_one_row_per_token_with_hf_equal_vectors(tmp_path, model_dir):
    text = tmp_path / "in.txt"
    text.write_text("the cat finds the letter.\nthe river hears ||| a farmer paints.\n")
    out = tmp_path / "features.parquet"
    command = [sys.executable, "-m", "bert_pipeline.extract_features", "--model", str(model_dir)]
    command += ["--input", str(text), "--output", str(out), "--layers", "-1", "-2", "0", "-1"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    frame = pd.read_parquet(out)
    assert list(frame.columns) == [
        "line",
        "position",
        "token",
        "segment",
        *[f"layer_{i}" for i in (-1, -2, 0)],
    ]
    first = frame[frame["line"] == 0]
    assert first["token"].iloc[0] == "[CLS]" and first["token"].iloc[-1] == "[SEP]"
    assert set(first["segment"]) == {0}
    second = frame[frame["line"] == 1]
    assert (second["token"] == "[SEP]").sum() == 2 and set(second["segment"]) == {0, 1}

    transformers = pytest.importorskip("transformers")
    hf = transformers.BertModel.from_pretrained(model_dir).eval()
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    ids = torch.tensor([[tokenizer.token_to_id(t) for t in second["token"]]])
    types = torch.tensor([second["segment"].tolist()])
    with torch.no_grad():
        ref = hf(input_ids=ids, token_type_ids=types, output_hidden_states=True).hidden_states
    for column, layer in (("layer_-1", -1), ("layer_-2", -2), ("layer_0", 0)):
        ours = torch.tensor(list(second[column]))
        torch.testing.assert_close(ours, ref[layer][0], atol=1e-5, rtol=0)


def test_bad_input_fails_naming_the_line_and_writes_nothing(tmp_path, model_dir, capsys):
    text = tmp_path / "in.txt"
    text.write_text("a line.\n\nanother.\n")
    out = tmp_path / "features.parquet"
    args = ["--model", str(model_dir), "--input", str(text), "--output", str(out)]
    assert main(args) == 1
    assert "in.txt:2: empty line" in capsys.readouterr().err
    text.write_text("a line.\n")
    assert main([*args, "--layers", "9"]) == 1
    assert "--layers [9]: the model has hidden states 0..2" in capsys.readouterr().err
    assert not out.exists()
