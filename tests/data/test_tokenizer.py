"""Tokenizer training, vocab.txt loading, the folder dataset and its errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bert_pipeline.data.tokenizer import (
    SPECIAL_TOKENS,
    TokenizerError,
    load_tokenizer,
    tokenizer_from_vocab,
    train_tokenizer,
)
from bert_pipeline.io.tokenizer_dataset import TokenizerDataset

TEXTS = ["The quick brown fox jumps over the lazy dog.", "Pack my box with five dozen jugs!"] * 20


def test_trained_tokenizer_layout_and_roundtrip(tmp_path: Path):
    tok = train_tokenizer(TEXTS, vocab_size=120, lowercase=True)
    assert [tok.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    enc = tok.encode("The fox", "the dog")
    assert enc.tokens[0] == "[CLS]" and enc.tokens.count("[SEP]") == 2
    assert enc.type_ids[-1] == 1 and enc.type_ids[0] == 0
    ds = TokenizerDataset(str(tmp_path / "tok"))
    ds.save(tok)
    assert sorted(p.name for p in (tmp_path / "tok").iterdir()) == ["tokenizer.json", "vocab.txt"]
    ds.save(tok)  # overwriting leaves no temporary folders behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tok"]
    again = ds.load()
    assert again.encode("The fox").ids == tok.encode("The fox").ids
    # vocab.txt alone (bert-base-uncased style folder) gives the same ids
    (tmp_path / "tok" / "tokenizer.json").unlink()
    assert load_tokenizer(tmp_path / "tok").encode("The fox").ids == tok.encode("The fox").ids


def test_training_gives_the_same_vocabulary_in_every_process(tmp_path: Path):
    """tokenizers' trainer alone varies between processes (huggingface/tokenizers#1794)."""
    words = [f"{a}{b}{c}" for a in "bcdfg" for b in "aeiou" for c in "lmnrst"]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(" ".join(words[i::7]) for i in range(7)), encoding="utf-8")
    script = (
        "import sys; from bert_pipeline.data.tokenizer import train_tokenizer, vocab_lines; "
        "texts = open(sys.argv[1], encoding='utf-8').read().splitlines(); "
        "print('|'.join(vocab_lines(train_tokenizer(texts, vocab_size=200, min_frequency=1))))"
    )
    vocabularies = {
        subprocess.run(
            [sys.executable, "-c", script, str(corpus)], capture_output=True, text=True, check=True
        ).stdout
        for _ in range(4)
    }
    assert len(vocabularies) == 1
    vocab = vocabularies.pop().strip().split("|")
    assert vocab[:5] == SPECIAL_TOKENS and "##a" in vocab


def test_vocab_txt_in_bert_uncased_layout(tmp_path: Path):
    words = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words += ["the", "dog", "##s", "run"]
    (tmp_path / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    tok = tokenizer_from_vocab(tmp_path / "vocab.txt")
    assert [tok.token_to_id(t) for t in ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]] == [
        100,
        101,
        102,
        103,
    ]
    assert tok.encode("The dogs run", add_special_tokens=False).tokens == [
        "the",
        "dog",
        "##s",
        "run",
    ]


def test_vocabulary_without_special_tokens(tmp_path: Path):
    (tmp_path / "vocab.txt").write_text("[UNK]\nthe\ndog\n", encoding="utf-8")
    with pytest.raises(TokenizerError, match=r"vocab.txt: vocabulary lacks .*\[PAD\]"):
        tokenizer_from_vocab(tmp_path / "vocab.txt")
    (tmp_path / "vocab.txt").write_text("the\ndog\n", encoding="utf-8")
    with pytest.raises(TokenizerError, match="UNK"):
        load_tokenizer(tmp_path)


def test_pad_must_be_id_zero(tmp_path: Path):
    (tmp_path / "vocab.txt").write_text("[UNK]\n[PAD]\n[CLS]\n[SEP]\n[MASK]\n", encoding="utf-8")
    with pytest.raises(TokenizerError, match=r"\[PAD\] must have id 0"):
        tokenizer_from_vocab(tmp_path / "vocab.txt")


def test_missing_tokenizer_folder(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="neither tokenizer.json nor vocab.txt"):
        load_tokenizer(tmp_path)
