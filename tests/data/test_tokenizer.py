"""Tokenizer training, vocab.txt loading, the folder dataset and its errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bert_pipeline.data.corpus import ingest_documents, split_documents
from bert_pipeline.data.examples import tokenize_sentences
from bert_pipeline.data.tokenizer import (
    SPECIAL_TOKENS,
    TokenizerError,
    WordIds,
    load_tokenizer,
    plain_wordpiece,
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
    """tokenizers' trainer alone varies between processes (huggingface/tokenizers#1794): in the
    `##c` ids, and in which of equally rare characters the alphabet limit keeps."""
    words = [f"{a}{b}{c}" for a in "bcdfg" for b in "aeiou" for c in "lmnrst"]
    # punctuation to Python's unicodedata that BertPreTokenizer keeps inside words
    inner = [f"ba{chr(c)}" for c in range(0x2E52, 0x2E57)] * 3
    rare = [chr(0x4E00 + i) for i in range(100)]  # seen once each, so tied at the alphabet's cut
    corpus = tmp_path / "corpus.txt"
    lines = [" ".join(words[i::7]) for i in range(7)] + [" ".join(rare[i::4]) for i in range(4)]
    lines.append(" ".join(inner))
    corpus.write_text("\n".join(lines), encoding="utf-8")
    script = (
        "import sys; from bert_pipeline.data.tokenizer import train_tokenizer, vocab_lines; "
        "texts = open(sys.argv[1], encoding='utf-8').read().splitlines(); "
        "print('|'.join(vocab_lines(train_tokenizer(texts, vocab_size=200, min_frequency=1, "
        "limit_alphabet=41))))"
    )
    vocabularies = {
        subprocess.run(
            [sys.executable, "-c", script, str(corpus)], capture_output=True, text=True, check=True
        ).stdout
        for _ in range(4)
    }
    assert len(vocabularies) == 1
    vocab = vocabularies.pop().strip().split("|")
    assert vocab[:5] == SPECIAL_TOKENS and "##a" in vocab and "##\u2e52" in vocab
    # the 16 letters and 5 inner characters, then the first 20 rare characters by code point
    assert [t for t in vocab if t in rare] == rare[:20]


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


def _ids_per_text(tok, texts: list[str], known: WordIds | None = None) -> list[list[int]]:
    tokens, lengths = tokenize_sentences(tok, texts, known)
    assert tokens.dtype == np.int32 and len(lengths) == len(texts)
    return [t.tolist() for t in np.split(tokens, np.cumsum(lengths)[:-1])]


def _assert_same_ids(tok, texts: list[str], known: WordIds | None = None) -> None:
    expected = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    got = _ids_per_text(tok, texts, known)
    wrong = [i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b]
    assert not wrong, f"{len(wrong)} texts differ, e.g. {texts[wrong[0]]!r}"


@pytest.fixture(scope="module", params=["uncased", "cased", "trained"])
def any_tokenizer(request, bert_vocab_file: Path):
    """bert-base-uncased's vocab lowercased and cased, and a trained one (it has added tokens)."""
    if request.param == "trained":
        return train_tokenizer(TEXTS + ["[MASK] naïve Ünïcödé 東京 ΣΟΦΙΑ"] * 3, vocab_size=150)
    return tokenizer_from_vocab(bert_vocab_file, lowercase=request.param == "uncased")


EDGE_CASES = [
    "e\u0301te\u0301 cafe\u0301 Ame\u0301lie \u0301 x \u0301\u0301y",  # combining accents
    "東京タワーは日本の电视塔 한국어 텍스트 mixed東京text",  # CJK, kana, hangul
    "a\x1cb c\x1dd e\x1ef g\x1fh a\x85b c\x0bd e\x0cf \x00 \ufffd x\x7fy \x1f\x1f",  # controls
    "a\u00a0b c\u3000d e\u2028f g\u2029h \u1680 \u2000\u200a \u202f\u205f x\u200by",
    "tab\there new\nline carriage\rreturn  double   spaces ",
    "x" * 99 + " " + "y" * 100 + " " + "z" * 101 + " " + "ab," * 60,  # max_input_chars_per_word
    "qwxzvbnqkj zzzxxyqq unseenword1234567 \U0001f600\U0001f680 \U00020000",  # unseen, astral
    "[MASK] [CLS]x[SEP] [PAD][UNK] [mask] [ MASK ] ##s ## #",  # special tokens in text
    "ΟΔΟΣ ΣΟΦΙΑ ὈΔΥΣΣΕΎΣ İstanbul ß ﬁ ǅ Ⅻ ①",  # casing with context or expansion
    "don't re-enter (a),b.c;d!e?f'g\"h«i»j—k–l…m·n¿o¡p",  # punctuation, ASCII and not
    "",
    " \t\n ",
]


def test_cached_ids_equal_the_tokenizer_on_unicode_edge_cases(any_tokenizer):
    _assert_same_ids(any_tokenizer, EDGE_CASES)


def test_cached_ids_equal_the_tokenizer_for_every_character(any_tokenizer):
    """Each character of the Basic Multilingual Plane between, before and after words."""
    chars = [chr(c) for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF]
    texts = [f"ab{c}cd {c}x{c} e\u0301{c}\u0301" for c in chars]
    _assert_same_ids(any_tokenizer, texts)


def test_words_of_ascii_letters_and_digits_skip_the_normalizer(any_tokenizer):
    """They go through the plain WordPiece (nothing reaches the full tokenizer) with the
    tokenizer's own ids: case, digits, words at and beyond max_input_chars_per_word."""
    texts = [
        "The Quick brown FOX jumps 1984 times over x86 and 3D",
        "x" * 99 + " " + "Y" * 100 + " " + "z" * 101 + " unseenword1234567 qwxzvbnqkj",
    ]
    counting = _CountingTokenizer(any_tokenizer)
    tokenize_sentences(counting, texts)
    assert plain_wordpiece(any_tokenizer) is not None and counting.chars == 0
    _assert_same_ids(any_tokenizer, texts)
    _assert_same_ids(any_tokenizer, texts, WordIds())


def test_an_added_token_of_letters_keeps_words_on_the_full_tokenizer(bert_vocab_file: Path):
    """Such a token could match inside a word, where the plain path would not see it."""
    tok = tokenizer_from_vocab(bert_vocab_file, lowercase=True)
    tok.add_tokens(["foo"])
    assert plain_wordpiece(tok) is None
    _assert_same_ids(tok, ["xfooy foo food barfoo", "the foo of Foo"], WordIds())


def test_cached_ids_equal_the_tokenizer_on_real_wikipedia(shared_data, any_tokenizer):
    """Every sentence of a real WikiExtractor file, and its raw lines (before our cleaning)."""
    source = {"kind": "wikiextractor", "path": str(shared_data / "corpora" / "wikipedia-en")}
    documents = ingest_documents({**source, "glob": "AA/wiki_00.gz"})
    sentences = split_documents(documents, progress=False)["text"].tolist()
    lines = [line for text in documents["text"] for line in text.split("\n")]
    assert len(sentences) > 3000
    _assert_same_ids(any_tokenizer, sentences + lines)


class _CountingTokenizer:
    """A tokenizer that records the characters it is asked to encode."""

    def __init__(self, tok):
        self.tok, self.chars = tok, 0

    def __getattr__(self, name):
        attr = getattr(self.tok, name)
        if not name.startswith("encode"):
            return attr

        def encode(texts, *args, **kwargs):
            self.chars += len(texts) if isinstance(texts, str) else sum(map(len, texts))
            return attr(texts, *args, **kwargs)

        return encode


def test_each_distinct_word_is_tokenized_once(bert_vocab):
    words = "the river flows past the old mill , and the mill turns .".split()
    texts = [" ".join(words[k:] + words[:k]) for k in range(len(words))] * 50
    counting = _CountingTokenizer(bert_vocab)
    tokenize_sentences(counting, texts)
    assert counting.chars <= sum(len(w) + 1 for w in set(words))
    _assert_same_ids(bert_vocab, texts)


@pytest.mark.parametrize("max_words", [3, 500_000])
def test_words_remembered_from_earlier_texts_give_the_tokenizers_ids(any_tokenizer, max_words):
    """A worker keeps the ids of the words of its earlier shards; new words, words beyond the
    cache's size and the edge cases still get the tokenizer's own ids."""
    known = WordIds(max_words=max_words)
    later = EDGE_CASES[::-1] + ["words never seen before arrive later", "naïve café ΣΟΦΙΑ"]
    for texts in (EDGE_CASES, TEXTS, later, EDGE_CASES):
        _assert_same_ids(any_tokenizer, texts, known)
    assert 0 < len(known.slot) <= max_words


def test_a_remembered_word_is_not_tokenized_again(bert_vocab):
    counting = _CountingTokenizer(bert_vocab)
    known = WordIds()
    tokenize_sentences(counting, TEXTS, known)
    before = counting.chars
    tokenize_sentences(counting, TEXTS[::-1] + ["fox dog"], known)
    assert before > 0 and counting.chars == before
