"""Example creation: google's algorithm on a real corpus, determinism and bad inputs."""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from bert_pipeline.data.corpus import ingest_documents, split_documents
from bert_pipeline.data.examples import (
    ExampleConfig,
    build_corpus,
    create_examples,
    tokenize_sentences,
    vocab_from_tokenizer,
)
from bert_pipeline.data.shards import write_shard
from bert_pipeline.data.stats import example_statistics
from bert_pipeline.data.tokenizer import train_tokenizer
from bert_pipeline.params import ConfigError
from bert_pipeline.schemas.pretraining import ExamplesFrameSchema

WIKITEXT_SOURCE = {
    "kind": "prose_folder",
    "glob": "wiki.valid.raw",
    "document_delimiter": r"^ = [^=].* = $",
    "skip_line_regex": r"^ (= )+.*( =)+ $",
}


def _prepare(source: dict):
    """A corpus source as (sentences, tokenizer, corpus, vocab)."""
    sentences = split_documents(ingest_documents(source))
    tok = train_tokenizer(sentences["text"].tolist(), vocab_size=8000)
    corpus = build_corpus(
        sentences["doc_id"].tolist(),
        sentences["sentence_index"].to_numpy(),
        *tokenize_sentences(tok, sentences["text"].tolist()),
    )
    return sentences, tok, corpus, vocab_from_tokenizer(tok)


@pytest.fixture(scope="module")
def wikitext(shared_data):
    """WikiText-2 valid as (sentences, tokenizer, corpus, vocab)."""
    return _prepare({**WIKITEXT_SOURCE, "path": str(shared_data / "corpora" / "wikitext-2-raw")})


def _flat_tokens(corpus, doc_id: str, s0: int, s1: int) -> np.ndarray:
    d = corpus.doc_ids.index(doc_id)
    lo, hi = corpus.doc_start[d], corpus.doc_start[d + 1]
    idx = np.flatnonzero(corpus.sent_index[lo:hi] >= s0) + lo
    idx = idx[corpus.sent_index[idx] < s1]
    return corpus.tokens[corpus.sent_start[idx[0]] : corpus.sent_start[idx[-1] + 1]]


def _is_subrange(part: np.ndarray, whole: np.ndarray, known: np.ndarray) -> bool:
    """`part` (with unknown = masked entries) equals some contiguous window of `whole`."""
    n = len(part)
    for start in range(len(whole) - n + 1):
        window = whole[start : start + n]
        if np.array_equal(window[known], part[known]):
            return True
    return False


@pytest.fixture(scope="module")
def bundled_sample(project_root):
    """The project's own sample corpus (always present, also in a fresh clone)."""
    source = {"kind": "prose_folder", "path": str(project_root / "data/01_raw/sample_corpus")}
    _, _, corpus, vocab = _prepare(source)
    return corpus, vocab


def test_google_algorithm_statistics_on_wikitext(wikitext):
    _, _, corpus, vocab = wikitext
    _assert_google_statistics(corpus, vocab, dupe_factor=5)


def test_google_algorithm_statistics_on_bundled_sample(bundled_sample):
    corpus, vocab = bundled_sample
    _assert_google_statistics(corpus, vocab, dupe_factor=12)


def _assert_google_statistics(corpus, vocab, dupe_factor: int) -> None:
    cfg = ExampleConfig(
        max_seq_length=128, max_predictions_per_seq=20, dupe_factor=dupe_factor, seed=1
    )
    table = create_examples(corpus, cfg, vocab, progress=False)
    stats = example_statistics(table, cfg, vocab)
    assert stats["n_examples"] >= 10_000
    assert stats["cap_bound_rate"] == 0.0  # round(128 * 0.15) = 19 < 20: the cap never binds
    # google picks round(len * 0.15) tokens with len counting [CLS]/[SEP]: 15.36% of maskable
    assert stats["selected_rate_uncapped"] == pytest.approx(0.15, abs=0.005)
    assert stats["mask_token_rate"] == pytest.approx(0.8, abs=0.015)
    assert stats["truncated_share"] < 0.2 and stats["warnings"] == []  # ordinary prose
    assert stats["kept_rate"] == pytest.approx(0.1, abs=0.015)
    assert stats["random_token_rate"] == pytest.approx(0.1, abs=0.015)
    # google draws target_seq_length once per document; a short target makes single-sentence
    # chunks, which can only take a random next, so IsNext falls below 50% (checked at 0.0 below)
    assert 0.40 <= stats["is_next_rate"] <= 0.55
    ExamplesFrameSchema.validate(table.to_pandas(), lazy=True)

    df = table.select(
        ["next_sentence_label", "a_doc_id", "b_doc_id", "a_sent_end", "b_sent_start"]
    ).to_pandas()
    is_next = df["next_sentence_label"] == 0
    assert (df["a_doc_id"][is_next] == df["b_doc_id"][is_next]).all()
    assert (df["b_sent_start"][is_next] == df["a_sent_end"][is_next]).all()
    assert (df["a_doc_id"][~is_next] != df["b_doc_id"][~is_next]).all()

    lengths = pc.list_value_length(table.column("input_ids")).to_numpy()
    assert lengths.max() <= cfg.max_seq_length
    ids = table.column("input_ids").combine_chunks()
    flat = pc.list_flatten(ids).to_numpy()
    offsets = ids.offsets.to_numpy()[:-1]
    pos_col = table.column("masked_lm_positions").combine_chunks()
    rows = pc.list_parent_indices(pos_col).to_numpy()
    pos = pc.list_flatten(pos_col).to_numpy()
    originals = pc.list_flatten(table.column("masked_lm_ids").combine_chunks()).to_numpy()
    assert not np.isin(originals, [vocab.cls_id, vocab.sep_id, vocab.pad_id]).any()
    assert (flat[offsets] == vocab.cls_id).all()
    assert (flat[offsets + lengths - 1] == vocab.sep_id).all()
    assert not np.isin(pos, [0]).any() and (pos < lengths[rows] - 1).all()

    # the tokens really come from the named sentences (A and B, masked positions excepted)
    for row in table.slice(0, 150).to_pylist():
        x = np.asarray(row["input_ids"])
        known = np.ones(len(x), dtype=bool)
        known[row["masked_lm_positions"]] = False
        sep = int(np.flatnonzero(np.asarray(row["token_type_ids"]) == 0)[-1])
        a_src = _flat_tokens(corpus, row["a_doc_id"], row["a_sent_start"], row["a_sent_end"])
        b_src = _flat_tokens(corpus, row["b_doc_id"], row["b_sent_start"], row["b_sent_end"])
        assert _is_subrange(x[1:sep], a_src, known[1:sep])
        assert _is_subrange(x[sep + 1 : -1], b_src, known[sep + 1 : -1])


def test_short_seq_prob_and_is_next_rate(wikitext):
    _, _, corpus, vocab = wikitext
    short, is_next = {}, {}
    for p in (0.0, 0.1):
        cfg = ExampleConfig(max_seq_length=128, dupe_factor=5, short_seq_prob=p, seed=3)
        table = create_examples(corpus, cfg, vocab, progress=False)
        assert table.num_rows >= 10_000
        stats = example_statistics(table, cfg, vocab)
        counts = np.asarray(stats["length_histogram"]["counts"])
        short[p] = counts[:8].sum() / counts.sum()  # shorter than 64 tokens
        is_next[p] = stats["is_next_rate"]
    assert short[0.1] > 0.01 and short[0.1] > 5 * short[0.0]
    # with full-length targets only a document's last lone sentence forces a random next
    assert 0.45 <= is_next[0.0] <= 0.55
    assert is_next[0.1] < is_next[0.0]


def test_seed_and_shard_key_the_randomness(wikitext):
    _, _, corpus, vocab = wikitext
    cfg = ExampleConfig(max_seq_length=64, dupe_factor=2, whole_word_mask=True, seed=7)
    one = create_examples(corpus, cfg, vocab, progress=False)
    assert one.equals(create_examples(corpus, cfg, vocab, progress=False))
    other_seed = ExampleConfig(max_seq_length=64, dupe_factor=2, whole_word_mask=True, seed=8)
    assert not one.equals(create_examples(corpus, other_seed, vocab, progress=False))
    other_shard = create_examples(corpus, cfg, vocab, shard=1, progress=False)
    assert not one.equals(other_shard)
    assert other_shard.column("example_id")[0].as_py() >= 2**32  # unique across shards


def test_whole_word_masking_masks_complete_words(wikitext):
    _, tok, corpus, vocab = wikitext
    cfg = ExampleConfig(max_seq_length=128, dupe_factor=1, whole_word_mask=True, seed=5)
    table = create_examples(corpus, cfg, vocab, progress=False)
    stats = example_statistics(table, cfg, vocab)
    assert stats["selected_rate"] <= 0.155
    split_words = masked_pieces = 0
    for row in table.slice(0, 300).to_pylist():
        original = np.asarray(row["input_ids"]).copy()
        original[row["masked_lm_positions"]] = row["masked_lm_ids"]
        masked = np.zeros(len(original), dtype=bool)
        masked[row["masked_lm_positions"]] = True
        cont = vocab.continuation[original]
        special = np.isin(original, [vocab.cls_id, vocab.sep_id])
        # a continuation piece is masked exactly when the piece before it is (inside a segment)
        inner = cont[1:] & ~special[:-1]
        split_words += int((masked[1:][inner] != masked[:-1][inner]).sum())
        masked_pieces += int((masked[1:] & inner).sum())
    assert split_words == 0 and masked_pieces > 0


def _corpus(docs: dict[str, list[list[int]]]):
    doc_ids, idx, toks = [], [], []
    for d, sents in docs.items():
        for k, s in enumerate(sents):
            doc_ids.append(d)
            idx.append(k)
            toks.append(s)
    lengths = [len(t) for t in toks]
    return build_corpus(doc_ids, np.asarray(idx), np.concatenate([[], *toks]), lengths)


@pytest.fixture
def toy_vocab():
    tok = train_tokenizer(["alpha beta gamma delta epsilon zeta eta theta"] * 5, vocab_size=60)
    return vocab_from_tokenizer(tok)


def test_one_sentence_document_only_has_random_next(toy_vocab):
    words = list(range(10, 30))
    corpus = _corpus({"single": [words[:6]], "other": [words[:4], words[4:8], words[8:12]]})
    cfg = ExampleConfig(max_seq_length=32, dupe_factor=4, seed=0)
    df = create_examples(corpus, cfg, toy_vocab, progress=False).to_pandas()
    single = df[df["a_doc_id"] == "single"]
    assert len(single) == 4 and (single["next_sentence_label"] == 1).all()
    assert (single["b_doc_id"] == "other").all()


def test_sentence_longer_than_sequence_is_truncated(toy_vocab):
    long = list(range(10, 50)) * 10  # 400 tokens in one sentence
    corpus = _corpus({"long": [long], "short": [[11, 12], [13, 14], [15, 16]]})
    cfg = ExampleConfig(max_seq_length=32, dupe_factor=3, seed=0)
    table = create_examples(corpus, cfg, toy_vocab, progress=False)
    lengths = pc.list_value_length(table.column("input_ids")).to_numpy()
    assert lengths.max() <= 32
    df = table.to_pandas()
    assert (df[df["a_doc_id"] == "long"]["input_ids"].map(len) == 32).all()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_seq_length": 4}, "max_seq_length=4 is too small"),
        ({"max_seq_length": 5}, "max_seq_length=5 is too small"),
        ({"masked_lm_prob": 0.0}, "masked_lm_prob"),
        ({"dupe_factor": 0}, "dupe_factor"),
        ({"max_predictions_per_seq": 0}, "max_predictions_per_seq"),
        (
            {"masking": "random"},
            r"pretrain_data.examples.masking=.random. must be static or dynamic",
        ),
    ],
)
def test_bad_parameters(kwargs, message, toy_vocab):
    corpus = _corpus({"a": [[10, 11], [12]], "b": [[13, 14]]})
    with pytest.raises(ValueError, match=message):
        create_examples(corpus, ExampleConfig(**kwargs), toy_vocab, progress=False)


def test_too_few_documents(toy_vocab):
    with pytest.raises(ValueError, match="only one document"):
        create_examples(
            _corpus({"a": [[10, 11], [12]]}), ExampleConfig(), toy_vocab, progress=False
        )
    with pytest.raises(ValueError, match="no documents with tokens"):
        create_examples(_corpus({"a": [[]]}), ExampleConfig(), toy_vocab, progress=False)


def test_schema_rejects_mask_on_sep(wikitext):
    _, _, corpus, vocab = wikitext
    cfg = ExampleConfig(max_seq_length=64, dupe_factor=1, seed=2)
    df = create_examples(corpus, cfg, vocab, progress=False).slice(0, 20).to_pandas()
    bad = df.copy()
    last = len(bad.at[3, "input_ids"]) - 1
    bad.at[3, "masked_lm_positions"] = np.asarray([last], dtype=np.int32)
    bad.at[3, "masked_lm_ids"] = np.asarray([vocab.sep_id], dtype=np.int32)
    ExamplesFrameSchema.validate(df)
    with pytest.raises(Exception, match="masked positions"):
        ExamplesFrameSchema.validate(bad, lazy=True)


def _types_swapped(types):
    t = np.asarray(types).copy()
    t[-3], t[-2] = 0, 1  # a 0 after the 1s of B
    return t


STRUCTURE_DEFECTS = {
    "token type 2": ("token_type_ids", lambda t: np.where(np.arange(len(t)) == 1, 2, t)),
    "token type -1": ("token_type_ids", lambda t: np.where(np.arange(len(t)) == 1, -1, t)),
    "B type inside A": ("token_type_ids", _types_swapped),
    "no B": ("token_type_ids", lambda t: np.zeros_like(t)),
    "A too short": ("token_type_ids", lambda t: np.where(np.arange(len(t)) >= 2, 1, 0)),
    "types shorter than ids": ("token_type_ids", lambda t: np.asarray(t)[:-1]),
    "mask on [CLS]": ("masked_lm_positions", lambda p: np.concatenate([[0], p[1:]])),
    "masks not rising": ("masked_lm_positions", lambda p: np.asarray(p)[::-1]),
}


@pytest.mark.parametrize("defect", sorted(STRUCTURE_DEFECTS))
def test_schema_names_the_row_of_each_structure_defect(wikitext, defect):
    from bert_pipeline.schemas.pretraining import _example_row_checks, _lists_stay_arrow

    _, _, corpus, vocab = wikitext
    cfg = ExampleConfig(max_seq_length=64, dupe_factor=1, seed=2)
    table = create_examples(corpus, cfg, vocab, progress=False).slice(0, 30)
    df = table.to_pandas()
    column, corrupt = STRUCTURE_DEFECTS[defect]
    rows = [k for k in range(len(df)) if len(df.at[k, "masked_lm_positions"]) >= 2][2:4]
    for k in rows:
        df.at[k, column] = np.asarray(corrupt(df.at[k, column]), dtype=df.at[0, column].dtype)
    frame = pa.Table.from_pandas(df, preserve_index=False).to_pandas(types_mapper=_lists_stay_arrow)
    ok = _example_row_checks(frame)
    assert np.flatnonzero(~ok.to_numpy()).tolist() == rows


def test_dynamic_masking_leaves_tokens_unmasked(wikitext):
    _, _, corpus, vocab = wikitext
    cfg = ExampleConfig(max_seq_length=64, dupe_factor=1, masking="dynamic", seed=2)
    table = create_examples(corpus, cfg, vocab, progress=False)
    assert pc.sum(pc.list_value_length(table.column("masked_lm_positions"))).as_py() == 0
    flat = pc.list_flatten(table.column("input_ids")).to_numpy()
    assert not (flat == vocab.mask_id).any()
    stats = example_statistics(table, cfg, vocab)
    assert stats["masking"] == "dynamic" and "selected_rate" not in stats


def test_example_parameters_are_typed_and_named():
    from bert_pipeline.pipelines.pretrain_data.nodes import example_config

    assert example_config({"masked_lm_prob": "0.2"}).masked_lm_prob == 0.2
    with pytest.raises(ValueError, match=r"pretrain_data.examples.dupe_factr: Key 'dupe_factr'"):
        example_config({"dupe_factr": 3})
    with pytest.raises(ValueError, match=r"pretrain_data.examples.masked_lm_prob=1.5 must be in"):
        example_config({"masked_lm_prob": 1.5})


def test_text_without_sentence_boundaries_is_reported(toy_vocab):
    """A 5,000-token 'sentence' becomes one truncated example: the report says so in one line."""
    corpus = _corpus({"flat": [[10 + i % 40 for i in range(5000)]], "b": [[13, 14], [15, 16]]})
    cfg = ExampleConfig(max_seq_length=32, dupe_factor=1, seed=0)
    stats = example_statistics(
        create_examples(corpus, cfg, toy_vocab, progress=False), cfg, toy_vocab
    )
    assert stats["truncated_share"] > 0.9
    (line,) = stats["warnings"]
    assert line.startswith("shard 0: truncation dropped 99% of the segment tokens (document 'flat'")


def test_truncation_warning_names_the_long_document_when_it_is_the_b_side(toy_vocab):
    """The 5,000-token document is cut most as the random B of another document's example; the
    warning names it, not that example's A."""
    short = {f"s{k}": [[10 + k + 2 * j, 11 + k + 2 * j] for j in range(4)] for k in range(6)}
    corpus = _corpus({"flat": [[10 + i % 40 for i in range(5000)]], **short})
    cfg = ExampleConfig(max_seq_length=32, dupe_factor=4, seed=0)
    table = create_examples(corpus, cfg, toy_vocab, progress=False)
    (line,) = example_statistics(table, cfg, toy_vocab)["warnings"]
    assert "(document 'flat' lost" in line
    df = table.to_pandas()
    worst = df.loc[df["b_truncated_tokens"].idxmax()]
    assert worst["b_doc_id"] == "flat" and worst["a_doc_id"] != "flat"
    assert worst["b_truncated_tokens"] > df["a_truncated_tokens"].max()  # cut most as a B
    assert f"lost {worst['b_truncated_tokens']} tokens in one example" in line


def test_max_seq_length_leaves_room_for_two_whole_sentences(toy_vocab):
    """7 = [CLS] + 2 + [SEP] + 2 + [SEP]: the shortest sentences (a word and its end mark) still
    make untruncated IsNext pairs; one token less is refused, naming the parameter."""
    with pytest.raises(ValueError, match=r"pretrain_data.examples.max_seq_length=6 is too small"):
        ExampleConfig(max_seq_length=6).check()
    sentences = [[10 + k, 11 + k] for k in range(0, 20, 2)]
    corpus = _corpus({"a": sentences, "b": sentences})
    cfg = ExampleConfig(max_seq_length=7, dupe_factor=4, seed=0)
    df = create_examples(corpus, cfg, toy_vocab, progress=False).to_pandas()
    is_next = df[df["next_sentence_label"] == 0]
    assert len(is_next) > len(df) / 4
    assert (is_next["a_truncated_tokens"] == 0).all() and (is_next["b_truncated_tokens"] == 0).all()


def test_no_nsp_ablation_pairs_consecutive_sentences_only(bundled_sample):
    """next_sentence=false: every B continues its A in the same document, all labelled IsNext."""
    corpus, vocab = bundled_sample
    cfg = ExampleConfig(max_seq_length=64, dupe_factor=1, seed=3, next_sentence=False)
    table = create_examples(corpus, cfg, vocab, progress=False)
    frame = table.select(
        ["next_sentence_label", "a_doc_id", "b_doc_id", "a_sent_end", "b_sent_start"]
    ).to_pandas()
    assert len(frame) > 500 and (frame["next_sentence_label"] == 0).all()
    assert (frame["a_doc_id"] == frame["b_doc_id"]).all()
    assert (frame["a_sent_end"] == frame["b_sent_start"]).all()
    ExamplesFrameSchema.validate(table.to_pandas(), lazy=True)  # the catalog schema accepts them


def test_sentence_order_swaps_the_chunks_own_segments_for_label_one(bundled_sample):
    """sentence_order=true (ALBERT's SOP): every B is from A's document, after A (label 0) or
    just before it (label 1), about half each (the default's shards: the reference test below)."""
    corpus, vocab = bundled_sample
    cfg = ExampleConfig(max_seq_length=64, dupe_factor=1, seed=3, sentence_order=True)
    table = create_examples(corpus, cfg, vocab, progress=False)
    frame = table.to_pandas()
    assert len(frame) > 500 and (frame["a_doc_id"] == frame["b_doc_id"]).all()
    swapped = frame["next_sentence_label"] == 1
    assert 0.4 < swapped.mean() < 0.6
    assert (frame["b_sent_end"] == frame["a_sent_start"])[swapped].all()
    assert (frame["a_sent_end"] == frame["b_sent_start"])[~swapped].all()
    ExamplesFrameSchema.validate(frame, lazy=True)
    with pytest.raises(ConfigError, match="sentence_order.*needs next_sentence=true"):
        ExampleConfig(next_sentence=False, sentence_order=True).check()


# sha256 of the example shard (Arrow IPC file) of the bundled sample corpus, one shard, as the
# code wrote it before the tokenizer cache and the faster example loop (main at bfd6b54 with the
# truncation column split into a_/b_truncated_tokens, which left every other column as it was)
REFERENCE_SHARDS = {
    "bert_vocab": {
        "default": "6c2b0cbf3642fff306958d2283e402cde07cefb33080ebc9d39f46c3e5609f90",
        "whole_word": "28b4220c81cb41f9c98385e3fdf953773fc01e8236472fdf417b01dd0fc42454",
        "no_nsp": "78477dbd528894562caa8d4d281e63455679968c2fe86a0ff520dcfdcd13a962",
        "dynamic": "f6ec0660f8e833135eccbbaf8ef08083a5475cbca4d425edb7a0d044243c2a27",
        "short": "9a765cd7bffa35847f97768df666846e6d911806623462981f8b42f5f0d2a268",
    },
    "trained": {
        "default": "18981eb91b864c0929cae1c24753ceb8c0ae39d63928c56774f4e2868eaa4654",
        "whole_word": "63728dc91b160a4daefb71af32721e96308c80868abaa94ee09063cdbd340452",
        "no_nsp": "624ed6ef1a186f2e4abf17d4b7ec419ff8df7696b9358c94b9f5a819ead4cd9d",
        "dynamic": "4cd9ca038e9a8faa343e7f3207339be4bf4f622b89c4d52c940fb2b202f23717",
        "short": "60d214998703bca94d8f27e3c30df45437208c9acc2650619748aacf42178c44",
    },
}
REFERENCE_CONFIGS = {
    "default": {"dupe_factor": 2},
    "whole_word": {"dupe_factor": 1, "whole_word_mask": True, "seed": 5},
    "no_nsp": {"dupe_factor": 1, "next_sentence": False},
    "dynamic": {"dupe_factor": 1, "masking": "dynamic"},
    "short": {"dupe_factor": 1, "max_seq_length": 16, "short_seq_prob": 0.5, "seed": 3},
}


@pytest.fixture(scope="module")
def sample_sentences(project_root):
    source = {"kind": "prose_folder", "path": str(project_root / "data/01_raw/sample_corpus")}
    return split_documents(ingest_documents(source), progress=False)


@pytest.mark.parametrize("tokenizer", list(REFERENCE_SHARDS))
def test_sample_corpus_shards_are_byte_identical_to_the_reference(
    tokenizer, sample_sentences, bert_vocab, tmp_path
):
    texts = sample_sentences["text"].tolist()
    tok = bert_vocab if tokenizer == "bert_vocab" else train_tokenizer(texts, vocab_size=8000)
    corpus = build_corpus(
        sample_sentences["doc_id"].tolist(),
        sample_sentences["sentence_index"].to_numpy(),
        *tokenize_sentences(tok, texts),
    )
    digests = {}
    for name, cfg in REFERENCE_CONFIGS.items():
        table = create_examples(corpus, ExampleConfig(**cfg), vocab_from_tokenizer(tok), 3, False)
        write_shard(table, tmp_path / name)
        digests[name] = hashlib.sha256((tmp_path / name).read_bytes()).hexdigest()
    assert digests == REFERENCE_SHARDS[tokenizer]


def test_build_corpus_refuses_ids_that_do_not_add_up():
    with pytest.raises(ValueError, match="3 token ids for sentences of 2 tokens"):
        build_corpus(["a", "a"], np.arange(2), np.array([5, 6, 7]), np.array([1, 1]))
