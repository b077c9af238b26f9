"""BERT WordPiece tokenizer: train one with `tokenizers`, build one from a vocab.txt, save and load.

The layout matches bert-base-uncased (BertNormalizer, BertPreTokenizer, WordPiece with `##`
continuations, `[CLS] A [SEP] B [SEP]` post-processor) so an HF vocab.txt works unchanged.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors, trainers
from tokenizers.models import WordPiece

from bert_pipeline.params import require

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = [PAD, UNK, CLS, SEP, MASK]
TOKENIZER_FILE = "tokenizer.json"
VOCAB_FILE = "vocab.txt"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"
MAX_INPUT_CHARS_PER_WORD = 100  # google's WordpieceTokenizer: a longer word is one [UNK]
# transformers' names for the five special tokens (its BertTokenizer's arguments)
SPECIAL_TOKEN_ROLES = {
    "unk_token": UNK,
    "sep_token": SEP,
    "pad_token": PAD,
    "cls_token": CLS,
    "mask_token": MASK,
}


@dataclass
class TokenizerParams:
    """The `pretrain_data.tokenizer` parameters."""

    vocab_file: str | None = None  # an existing vocab.txt instead of training one
    vocab_size: int = 30522
    lowercase: bool = True
    min_frequency: int = 2
    limit_alphabet: int = 1000  # characters kept (the most frequent); a word with another is [UNK]
    sample_size: int = 1_000_000  # sentences to train on (a seeded sample)
    seed: int = 12345

    def check(self, root: str) -> None:
        for name in ("vocab_size", "min_frequency", "limit_alphabet", "sample_size"):
            require(getattr(self, name) >= 1, root, name, "must be >= 1", getattr(self, name))


class TokenizerError(ValueError):
    """A vocabulary or tokenizer folder that cannot serve BERT pretraining."""


def _wordpiece(vocab: dict[str, int] | None = None) -> WordPiece:
    return WordPiece(vocab, unk_token=UNK, max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD)


def _configure(tok: Tokenizer, lowercase: bool) -> Tokenizer:
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    return tok


def _add_post_processor(tok: Tokenizer, source: str) -> Tokenizer:
    ids = special_token_ids(tok, source)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{CLS} $A {SEP}",
        pair=f"{CLS} $A {SEP} $B:1 {SEP}:1",
        special_tokens=[(CLS, ids[CLS]), (SEP, ids[SEP])],
    )
    return tok


def special_token_ids(tok: Tokenizer, source: str = "tokenizer") -> dict[str, int]:
    """Ids of the five BERT special tokens; a clear error if any is missing or [PAD] is not 0."""
    ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}
    missing = [t for t, i in ids.items() if i is None]
    if missing:
        raise TokenizerError(
            f"{source}: vocabulary lacks the special token(s) {missing}; a BERT vocabulary needs "
            f"{SPECIAL_TOKENS} (with [PAD] at id 0)"
        )
    if ids[PAD] != 0:
        raise TokenizerError(f"{source}: [PAD] must have id 0, found {ids[PAD]}")
    return ids


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int = TokenizerParams.vocab_size,
    lowercase: bool = TokenizerParams.lowercase,
    min_frequency: int = TokenizerParams.min_frequency,
    limit_alphabet: int = TokenizerParams.limit_alphabet,
    length: int | None = None,
) -> Tokenizer:
    """Trains a WordPiece vocabulary on `texts`; special tokens take ids 0..4 ([PAD]=0).

    The same texts give the same vocabulary in every run and process (see `_alphabet`).
    """
    if vocab_size <= len(SPECIAL_TOKENS):
        raise TokenizerError(
            f"parameter vocab_size={vocab_size} must exceed the {len(SPECIAL_TOKENS)} special "
            "tokens"
        )
    texts = list(texts)  # read twice: once for the alphabet, once to train
    tok = _configure(Tokenizer(_wordpiece()), lowercase)
    alphabet = _alphabet(tok, texts, limit_alphabet)
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        limit_alphabet=limit_alphabet,
        initial_alphabet=alphabet,  # kept whole, so the limit cuts exactly the other characters
        special_tokens=SPECIAL_TOKENS + ["##" + c for c in alphabet if _continues_words(tok, c)],
        continuing_subword_prefix="##",
        show_progress=False,
    )
    tok.train_from_iterator(_batched(texts), trainer=trainer, length=length or len(texts))
    # Rebuilt from the learned vocabulary so that only the five BERT tokens are special.
    trained = _configure(Tokenizer(_wordpiece(tok.get_vocab())), lowercase)
    trained.add_special_tokens(SPECIAL_TOKENS)
    return _add_post_processor(trained, "trained tokenizer")


def _alphabet(tok: Tokenizer, texts: list[str], limit_alphabet: int) -> list[str]:
    """The `limit_alphabet` most frequent characters (ties by code point), in code-point order.

    tokenizers' trainer creates the `##c` tokens (huggingface/tokenizers#1794) and cuts its
    alphabet among equally frequent characters in the order of a hash map, so the kept characters,
    the ids and through tie-breaks between equally frequent merges the whole vocabulary change
    from run to run. Passed in as the initial alphabet and as special tokens, they are fixed.
    """
    counts: Counter[str] = Counter()
    for start in range(0, len(texts), 10_000):
        counts.update(tok.normalizer.normalize_str("\n".join(texts[start : start + 10_000])))
    chars = [c for c in counts if not c.isspace()]  # the pre-tokenizer drops whitespace
    return sorted(sorted(chars, key=lambda c: (-counts[c], c))[:limit_alphabet])


def _continues_words(tok: Tokenizer, char: str) -> bool:
    """Whether `char` can follow another character in a word, asked of the tokenizer itself."""
    return len(tok.pre_tokenizer.pre_tokenize_str(tok.normalizer.normalize_str(f"a{char}a"))) == 1


def _batched(texts: Iterable[str], size: int = 1000) -> Iterator[list[str]]:
    batch: list[str] = []
    for t in texts:
        batch.append(t)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def tokenizer_from_vocab(vocab_file: str | Path, lowercase: bool = True) -> Tokenizer:
    """Builds the BERT tokenizer around an existing vocab.txt (one token per line, id = line)."""
    path = Path(vocab_file)
    if not path.is_file():
        raise FileNotFoundError(f"vocab file {path} does not exist")
    return _from_vocab_text(path.read_text(encoding="utf-8"), lowercase, str(path))


def _from_vocab_text(text: str, lowercase: bool, source: str) -> Tokenizer:
    vocab: dict[str, int] = {}
    for line in text.splitlines():
        token = line.rstrip("\r\n")
        if token and token not in vocab:
            vocab[token] = len(vocab)
    if not vocab:
        raise TokenizerError(f"{source}: the vocabulary is empty")
    if UNK not in vocab:
        raise TokenizerError(f"{source}: vocabulary lacks the special token(s) ['{UNK}']")
    tok = _configure(Tokenizer(_wordpiece(vocab)), lowercase)
    return _add_post_processor(tok, source)


def vocab_lines(tok: Tokenizer) -> list[str]:
    """The vocabulary ordered by id, as written to vocab.txt."""
    vocab = tok.get_vocab(with_added_tokens=True)
    ordered = sorted(vocab.items(), key=lambda kv: kv[1])
    if [i for _, i in ordered] != list(range(len(ordered))):
        raise TokenizerError("tokenizer vocabulary ids are not contiguous from 0")
    return [t for t, _ in ordered]


def tokenizer_files(tok: Tokenizer) -> dict[str, bytes]:
    """tokenizer.json (the whole pipeline) and vocab.txt (for BERT tools that read only that)."""
    return {
        TOKENIZER_FILE: tok.to_str().encode("utf-8"),
        VOCAB_FILE: ("\n".join(vocab_lines(tok)) + "\n").encode("utf-8"),
    }


def lowercases(tok: Tokenizer) -> bool:
    """Whether the tokenizer's normalizer lowercases (a BertNormalizer flag or a Lowercase step)."""
    normalizer = json.loads(tok.to_str()).get("normalizer") or {}
    steps = normalizer.get("normalizers", [normalizer]) if normalizer else []
    return any(
        step.get("type") == "Lowercase"
        or (step.get("type") == "BertNormalizer" and step.get("lowercase"))
        for step in steps
    )


def transformers_files(tok: Tokenizer, model_max_length: int) -> dict[str, bytes]:
    """tokenizer_config.json and special_tokens_map.json for transformers' AutoTokenizer: its
    BertTokenizer rebuilds the normalizer from `do_lower_case` (not from tokenizer.json) and
    truncates at `model_max_length` (else at 1e30 tokens)."""
    config = {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": lowercases(tok),
        "model_max_length": int(model_max_length),
        **SPECIAL_TOKEN_ROLES,
    }
    return {
        TOKENIZER_CONFIG_FILE: _json_bytes(config),
        SPECIAL_TOKENS_MAP_FILE: _json_bytes(SPECIAL_TOKEN_ROLES),
    }


def _json_bytes(value: Mapping) -> bytes:
    return (json.dumps(value, indent=2) + "\n").encode("utf-8")


def tokenizer_from_files(
    files: Mapping[str, bytes], lowercase: bool = True, source: str = "tokenizer"
) -> Tokenizer:
    """The tokenizer from tokenizer.json if present, else from vocab.txt (then `lowercase` sets
    the normalizer, as the vocabulary alone cannot tell)."""
    if TOKENIZER_FILE in files:
        where = f"{source}/{TOKENIZER_FILE}"
        try:
            tok = Tokenizer.from_str(files[TOKENIZER_FILE].decode("utf-8"))
        except Exception as exc:  # tokenizers raises a bare Exception for bad JSON
            raise TokenizerError(f"{where}: not a tokenizers JSON file ({exc})") from None
        special_token_ids(tok, where)
        return tok
    if VOCAB_FILE in files:
        return _from_vocab_text(
            files[VOCAB_FILE].decode("utf-8"), lowercase, f"{source}/{VOCAB_FILE}"
        )
    raise FileNotFoundError(f"{source} holds neither {TOKENIZER_FILE} nor {VOCAB_FILE}")


def save_tokenizer(tok: Tokenizer, directory: str | Path) -> None:
    """Writes tokenizer.json and vocab.txt into `directory` (created if needed)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    for name, data in tokenizer_files(tok).items():
        (out / name).write_bytes(data)


def load_tokenizer(directory: str | Path, lowercase: bool = True) -> Tokenizer:
    """Loads a tokenizer folder (see `tokenizer_from_files`)."""
    path = Path(directory)
    files = {
        n: (path / n).read_bytes() for n in (TOKENIZER_FILE, VOCAB_FILE) if (path / n).is_file()
    }
    return tokenizer_from_files(files, lowercase, str(path))


# Candidate separators: Unicode's White_Space (Rust's `char::is_whitespace`, on which
# BertPreTokenizer splits) is within Python's `str.isspace`, none above U+3000. A separator missed
# here stays inside a word and only costs speed; a wrong one would change ids.
PYTHON_SPACES = "".join(c for c in map(chr, range(0x3001)) if c.isspace())


@dataclass(frozen=True)
class WordBoundaries:
    """Where a tokenizer always cuts a text: at `separators` (no token) and around each of
    `isolated` (a token of its own, e.g. ASCII punctuation for BERT)."""

    separators: str
    isolated: str


def word_boundaries(tok: Tokenizer) -> WordBoundaries | None:
    """The boundaries of `tok`'s words, or None when the ids of a text may differ from the ids
    of its pieces between them, concatenated.

    They exist for BertNormalizer (it works character by character) and BertPreTokenizer
    without truncation or padding, and added tokens without whitespace. The characters are asked
    of the tokenizer itself: BertNormalizer deletes some whitespace (\\x85, \\x0b, \\x0c) as
    control characters, so "a\\x85b" is one word; characters of added tokens ("[" of "[MASK]")
    are never isolated, as the tokenizer matches those tokens before cutting words.
    """
    simple = (
        isinstance(tok.normalizer, normalizers.BertNormalizer)
        and isinstance(tok.pre_tokenizer, pre_tokenizers.BertPreTokenizer)
        and tok.truncation is None
        and tok.padding is None
    )
    added = "".join(t.content for t in tok.get_added_tokens_decoder().values())
    if not simple or any(c in PYTHON_SPACES for c in added):
        return None

    def words(c: str) -> list[str]:
        found = tok.pre_tokenizer.pre_tokenize_str(tok.normalizer.normalize_str(f"a{c}b"))
        return [w for w, _ in found]

    separators = "".join(c for c in PYTHON_SPACES if words(c) == ["a", "b"])
    if " " not in separators:  # split_words cuts at spaces
        return None
    ascii_symbols = (chr(i) for i in range(33, 127) if chr(i) not in added)
    isolated = "".join(c for c in ascii_symbols if words(c) == ["a", c, "b"])
    return WordBoundaries(separators, isolated)


def plain_wordpiece(tok: Tokenizer) -> Tokenizer | None:
    """`tok`'s WordPiece behind a plain lowercase (or no) normalizer and a whitespace split, for
    words of ASCII letters and digits only: on those BertNormalizer does nothing but lowercase
    (there is nothing to clean, strip or pad) and BertPreTokenizer keeps each whole, so the
    WordPiece model sees the same text and gives the same ids, in about half the time (the
    Unicode normalizer and its alignment tracking are skipped). None where this does not hold:
    no word boundaries (see `word_boundaries`), or an added token of ASCII letters and digits,
    which could match inside such a word."""
    if word_boundaries(tok) is None:
        return None
    added = tok.get_added_tokens_decoder().values()
    if any(t.content.isascii() and t.content.isalnum() for t in added):
        return None
    plain = Tokenizer.from_str(tok.to_str())
    plain.normalizer = normalizers.Lowercase() if tok.normalizer.lowercase else None
    plain.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return plain


def _encode_words(tok: Tokenizer, words: Sequence[str], per_text: int, plain: bool):
    """(flat int32 ids, int64 count per word) of `words`, `per_text` words per Encoding."""
    texts = [" ".join(words[lo : lo + per_text]) for lo in range(0, len(words), per_text)]
    ids, counts = [np.zeros(0, dtype=np.int32)], [np.zeros(0, dtype=np.int64)]
    for k, encoding in enumerate(tok.encode_batch(texts, add_special_tokens=False)):
        batch = words[k * per_text : (k + 1) * per_text]
        if plain:  # one pre-token per word: its index is the word's
            owner = np.asarray(encoding.word_ids, dtype=np.int64)
        else:  # a word may be several pre-tokens: each token finds its word by its offset
            starts = np.cumsum([0] + [len(w) + 1 for w in batch[:-1]])
            first = np.fromiter((o[0] for o in encoding.offsets), np.int64, len(encoding.ids))
            owner = np.searchsorted(starts, first, side="right") - 1
        ids.append(np.asarray(encoding.ids, dtype=np.int32))
        counts.append(np.bincount(owner, minlength=len(batch)))
    return np.concatenate(ids), np.concatenate(counts).astype(np.int64)


def encode_distinct(
    tok: Tokenizer, words: Sequence[str], plain: Tokenizer | None = None, per_text: int = 1000
):
    """Ids of each of `words` (no special tokens) as (flat int32 ids, int64 count per word).

    The words go through the tokenizer `per_text` at a time, joined by spaces: one Encoding per
    thousand words, not per word, as an Encoding costs more than a word. With `plain` (from
    `plain_wordpiece(tok)`), the words of ASCII letters and digits go through it instead.
    """
    if plain is None:
        return _encode_words(tok, words, per_text, plain=False)
    simple = np.fromiter((w.isascii() and w.isalnum() for w in words), bool, len(words))
    groups = [np.flatnonzero(simple), np.flatnonzero(~simple)]
    parts = [
        _encode_words(t, [words[i] for i in group], per_text, plain=t is plain)
        for t, group in zip((plain, tok), groups, strict=True)
    ]
    # back to the order of `words`: a stable sort of the tokens by the word they belong to
    word = np.repeat(np.concatenate(groups), np.concatenate([c for _, c in parts]))
    ids = np.concatenate([i for i, _ in parts])[np.argsort(word, kind="stable")]
    return ids, np.bincount(word, minlength=len(words)).astype(np.int64)


class WordIds:
    """The ids of the words one process has tokenized, for the next texts it tokenizes.

    The shards a worker builds share most of their words (on Wikipedia a shard's distinct words
    were tokenized by the previous shards 55-70% of the time), so only new words go through the
    tokenizer. At most `max_words` words are kept (the first met, which are the frequent ones);
    words beyond are tokenized every time. The ids are those of the tokenizer of the first
    `locate`, whose `plain_wordpiece` is built then, once per process.
    """

    def __init__(self, max_words: int = 500_000) -> None:
        self.max_words = max_words
        self.plain: Tokenizer | None = None
        self.plain_built = False
        self.slot: dict[str, int] = {}
        self.ids = np.zeros(0, dtype=np.int32)
        self.start = np.zeros(1, dtype=np.int64)  # word k owns ids[start[k]:start[k + 1]]

    def locate(
        self, tok: Tokenizer, words: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Where the ids of each of `words` lie: (ids, each word's first position in them, each
        word's number of ids). Known words are found in the cache; new ones are tokenized
        (`encode_distinct`) and kept while there is room."""
        if not self.plain_built:
            self.plain, self.plain_built = plain_wordpiece(tok), True
        where = np.fromiter(map(self.slot.get, words, repeat(-1)), np.int64, len(words))
        new = np.flatnonzero(where < 0)
        ids, start = self.ids, self.start
        if len(new):
            new_words = [words[i] for i in new]
            new_ids, new_counts = encode_distinct(tok, new_words, self.plain)
            first = len(start) - 1
            ids = np.concatenate([ids, new_ids])
            start = np.concatenate([start, start[-1] + np.cumsum(new_counts)])
            where[new] = first + np.arange(len(new))
            kept = min(max(self.max_words - len(self.slot), 0), len(new))
            if kept:
                self.slot.update(zip(new_words[:kept], range(first, first + kept), strict=True))
                self.ids, self.start = ids[: start[first + kept]], start[: first + kept + 1]
        return ids, start[where], start[where + 1] - start[where]


def _char_class(chars: str) -> str:
    return "[" + "".join(f"\\x{{{ord(c):x}}}" for c in chars) + "]"


def split_words(
    texts: Sequence[str], bounds: WordBoundaries
) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """`texts` cut at `bounds` (in Arrow, no Python loop per word): the distinct pieces, the
    index of each piece occurrence into them, and each text's offsets into the occurrences."""
    column = pa.array(texts, pa.large_string())
    others = bounds.separators.replace(" ", "")
    if others:
        column = pc.replace_substring_regex(column, _char_class(others), " ")
    if bounds.isolated:
        column = pc.replace_substring_regex(column, f"({_char_class(bounds.isolated)})", r" \1 ")
    pieces = pc.split_pattern(column, " ")
    codes = pc.dictionary_encode(pc.list_flatten(pieces))
    offsets = pieces.offsets.to_numpy()
    return codes.dictionary, codes.indices.to_numpy().astype(np.int64), offsets
