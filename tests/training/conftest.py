"""Small learnable pretraining data built in memory: a WordPiece tokenizer, an examples table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bert_pipeline.data.tokenizer import CLS, SEP, train_tokenizer

SUBJECTS = ["the cat", "a dog", "my friend", "the old king", "a small bird", "the teacher"]
VERBS = ["sees", "likes", "follows", "finds", "paints", "remembers"]
OBJECTS = ["the river", "a red house", "the green hill", "an apple", "the moon", "a letter"]


def _documents(n_docs: int, sentences_per_doc: int, seed: int) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    docs = []
    for _ in range(n_docs):
        docs.append(
            [
                f"{SUBJECTS[rng.integers(6)]} {VERBS[rng.integers(6)]} {OBJECTS[rng.integers(6)]} ."
                for _ in range(sentences_per_doc)
            ]
        )
    return docs


@pytest.fixture(scope="session")
def tiny_tokenizer():
    docs = _documents(20, 6, seed=0)
    return train_tokenizer((s for d in docs for s in d), vocab_size=120, min_frequency=1)


def make_examples(tokenizer, n_docs: int = 24, seed: int = 1) -> pd.DataFrame:
    """Dynamic-mode examples (`[CLS] A [SEP] B [SEP]`, no masks) following the table contract."""
    rng = np.random.default_rng(seed)
    docs = _documents(n_docs, 6, seed)
    cls, sep = tokenizer.token_to_id(CLS), tokenizer.token_to_id(SEP)
    rows = []
    for d, doc in enumerate(docs):
        for s in range(len(doc) - 1):
            is_random = bool(rng.random() < 0.5)
            b_doc = int(rng.integers(n_docs)) if is_random else d
            b_sent = int(rng.integers(6)) if is_random else s + 1
            a = tokenizer.encode(doc[s], add_special_tokens=False).ids
            b = tokenizer.encode(docs[b_doc][b_sent], add_special_tokens=False).ids
            ids = [cls, *a, sep, *b, sep]
            rows.append(
                {
                    "example_id": len(rows),
                    "input_ids": np.asarray(ids, dtype=np.int32),
                    "token_type_ids": np.asarray([0] * (len(a) + 2) + [1] * (len(b) + 1), np.int8),
                    "masked_lm_positions": np.asarray([], dtype=np.int32),
                    "masked_lm_ids": np.asarray([], dtype=np.int32),
                    "next_sentence_label": np.int8(is_random),
                    "a_doc_id": f"doc{d}",
                    "b_doc_id": f"doc{b_doc}",
                    "a_sent_start": np.int32(s),
                    "a_sent_end": np.int32(s + 1),
                    "b_sent_start": np.int32(b_sent),
                    "b_sent_end": np.int32(b_sent + 1),
                }
            )
    return pd.DataFrame(rows)


@pytest.fixture(scope="session")
def tiny_examples(tiny_tokenizer) -> pd.DataFrame:
    return make_examples(tiny_tokenizer)


# The manifest's record of the settings that made the tiny examples (pretrain_data.examples)
EXAMPLE_PARAMETERS = {
    "max_seq_length": 64,
    "masked_lm_prob": 0.15,
    "max_predictions_per_seq": 20,
    "whole_word_mask": False,
    "next_sentence": True,
}


def write_shards(
    frame: pd.DataFrame,
    tokenizer,
    folder,
    n_shards: int = 2,
    parameters: dict | None = EXAMPLE_PARAMETERS,
):
    """`frame` saved as a pretraining_examples folder (Arrow shards + manifest), loaded back."""
    import pyarrow as pa

    from bert_pipeline.data.shards import ExampleShards, tokenizer_fingerprint
    from bert_pipeline.io.example_shards_dataset import ExampleShardsDataset

    table = pa.Table.from_pandas(frame, preserve_index=False)
    step = -(-table.num_rows // n_shards)
    parts = [table.slice(i, step) for i in range(0, table.num_rows, step)]
    dataset = ExampleShardsDataset(str(folder))
    manifest = {"tokenizer_sha256": tokenizer_fingerprint(tokenizer)}
    if parameters is not None:
        manifest["parameters"] = parameters  # as pretrain_data records its examples' settings
    dataset.save(ExampleShards(parts, manifest))
    return dataset.load()


@pytest.fixture
def tiny_shards(tmp_path, tiny_examples, tiny_tokenizer):
    return write_shards(tiny_examples, tiny_tokenizer, tmp_path / "examples")
