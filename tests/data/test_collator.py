"""PretrainingCollator: padding, static pass-through and dynamic 80/10/10 masking."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bert_pipeline.data.collator import IGNORE_INDEX, PretrainingCollator
from bert_pipeline.data.masking import corrupt, num_to_predict

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
VOCAB = 1000


def _example(n_a: int, n_b: int, rng: np.random.Generator, masked=None) -> dict:
    a = rng.integers(5, VOCAB, n_a).tolist()
    b = rng.integers(5, VOCAB, n_b).tolist()
    ids = [CLS, *a, SEP, *b, SEP]
    types = [0] * (n_a + 2) + [1] * (n_b + 1)
    pos, lab = masked or ([], [])
    return {
        "input_ids": np.array(ids, dtype=np.int32),
        "token_type_ids": np.array(types, dtype=np.int8),
        "masked_lm_positions": np.array(pos, dtype=np.int32),
        "masked_lm_ids": np.array(lab, dtype=np.int32),
        "next_sentence_label": 1,
    }


def _dynamic(**kw) -> PretrainingCollator:
    args = dict(
        pad_token_id=PAD,
        mask_token_id=MASK,
        vocab_size=VOCAB,
        special_token_ids=[PAD, UNK, CLS, SEP, MASK],
        dynamic_masking=True,
        max_predictions_per_seq=20,
        seed=7,
    )
    args.update(kw)
    return PretrainingCollator(**args)


def test_static_pads_and_passes_masks_through():
    rng = np.random.default_rng(0)
    ex = [_example(3, 4, rng, ([1, 5], [11, 12])), _example(10, 2, rng, ([2], [13]))]
    ex[0]["input_ids"][[1, 5]] = MASK
    batch = PretrainingCollator(pad_token_id=PAD, pad_to_multiple_of=8)(ex)
    assert batch["input_ids"].shape == (2, 16)
    assert all(v.dtype == torch.long for v in batch.values())
    assert batch["attention_mask"].sum(1).tolist() == [10, 15]
    assert batch["input_ids"][0, 10:].eq(PAD).all()
    assert batch["token_type_ids"][1].tolist()[:15] == [0] * 12 + [1] * 3
    assert batch["masked_lm_positions"].tolist() == [[1, 5], [2, 0]]
    assert batch["masked_lm_labels"].tolist() == [[11, 12], [13, IGNORE_INDEX]]
    assert batch["next_sentence_label"].tolist() == [1, 1]
    assert batch["input_ids"][0, 1] == MASK


def test_dynamic_rates_and_invariants():
    rng = np.random.default_rng(1)
    examples = [
        _example(int(rng.integers(1, 60)), int(rng.integers(1, 60)), rng) for _ in range(64)
    ]
    collate = _dynamic(max_predictions_per_seq=1000)
    n_sel = n_maskable = n_mask = n_rand = n_keep = 0
    for _ in range(40):
        batch = collate(examples)
        ids, pos, lab = batch["input_ids"], batch["masked_lm_positions"], batch["masked_lm_labels"]
        valid = lab != IGNORE_INDEX
        for row, ex in enumerate(examples):
            orig = torch.as_tensor(ex["input_ids"], dtype=torch.long)
            p = pos[row][valid[row]]
            assert torch.equal(p, p.sort().values) and p.unique().numel() == p.numel()
            assert torch.equal(lab[row][valid[row]], orig[p])
            assert not torch.isin(orig[p], torch.tensor([CLS, SEP, PAD])).any()
            assert int(p.max()) < len(orig)
            unchanged = torch.ones(len(orig), dtype=torch.bool)
            unchanged[p] = False
            assert torch.equal(ids[row, : len(orig)][unchanged], orig[unchanged])
            expected = min(max(1, round(len(orig) * 0.15)), len(orig) - 3)
            assert p.numel() == expected
            got = ids[row, p]
            n_mask += int((got == MASK).sum())
            n_keep += int((got == orig[p]).sum())
            n_rand += int(((got != MASK) & (got != orig[p])).sum())
            n_sel += p.numel()
            n_maskable += len(orig) - 3
    assert n_sel / n_maskable == pytest.approx(
        0.15 * (n_maskable + 3 * 64 * 40) / n_maskable, abs=0.01
    )
    assert n_mask / n_sel == pytest.approx(0.8, abs=0.015)
    # a random draw can hit the original id (1/1000), so "keep" is 10% plus a hair
    assert n_keep / n_sel == pytest.approx(0.1, abs=0.015)
    assert n_rand / n_sel == pytest.approx(0.1, abs=0.015)


def test_dynamic_whole_words_take_every_piece_of_a_word():
    """Ids from 700 up are `##` pieces: a piece is masked exactly when the token before it is
    (a piece right after [SEP] starts a word), and the rows stay within google's count."""
    rng = np.random.default_rng(4)
    examples = [
        _example(int(rng.integers(5, 60)), int(rng.integers(5, 60)), rng) for _ in range(32)
    ]
    continuation = np.arange(VOCAB) >= 700
    collate = _dynamic(continuation=continuation)
    n_sel = n_expected = inner_masked = 0
    for _ in range(10):
        batch = collate(examples)
        lab = batch["masked_lm_labels"]
        for row, ex in enumerate(examples):
            orig = np.asarray(ex["input_ids"])
            p = batch["masked_lm_positions"][row][lab[row] != IGNORE_INDEX].numpy()
            masked = np.zeros(len(orig), dtype=bool)
            masked[p] = True
            inner = continuation[orig[1:]] & ~np.isin(orig[:-1], [CLS, SEP])
            assert np.array_equal(masked[1:][inner], masked[:-1][inner])
            inner_masked += int((masked[1:] & inner).sum())
            expected = min(max(1, round(len(orig) * 0.15)), 20)
            assert 1 <= len(p) <= expected
            n_sel, n_expected = n_sel + len(p), n_expected + expected
    assert inner_masked > 0 and n_sel / n_expected > 0.9
    again = _dynamic(continuation=continuation)(examples)
    assert torch.equal(
        again["masked_lm_positions"],
        _dynamic(continuation=continuation)(examples)["masked_lm_positions"],
    )
    assert not torch.equal(
        again["masked_lm_positions"], _dynamic()(examples)["masked_lm_positions"]
    )


def test_dynamic_cap_and_padding_never_masked():
    rng = np.random.default_rng(2)
    examples = [_example(100, 100, rng), _example(2, 1, rng)]
    batch = _dynamic(max_predictions_per_seq=5)(examples)
    valid = batch["masked_lm_labels"] != IGNORE_INDEX
    assert valid.sum(1).tolist() == [5, 1]
    assert batch["masked_lm_positions"].shape == (2, 5)
    assert int(batch["masked_lm_positions"][1][valid[1]].max()) < 6
    assert batch["input_ids"][1, 6:].eq(PAD).all()


def test_dynamic_is_deterministic_and_changes_per_call():
    rng = np.random.default_rng(3)
    examples = [_example(30, 30, rng) for _ in range(8)]
    a1, a2 = _dynamic(seed=11), _dynamic(seed=11)
    first, again = a1(examples), a2(examples)
    for key in first:
        assert torch.equal(first[key], again[key])
    second = a1(examples)
    assert not torch.equal(first["masked_lm_positions"], second["masked_lm_positions"])
    # the examples themselves are not modified
    assert MASK not in examples[0]["input_ids"]


def test_dynamic_requires_mask_token():
    with pytest.raises(ValueError, match="mask_token_id"):
        PretrainingCollator(dynamic_masking=True, vocab_size=10)


def test_workers_get_distinct_streams():
    """Each DataLoader worker holds a copy of the collator; they must not repeat each other."""
    rng = np.random.default_rng(4)
    examples = [_example(40, 40, rng) for _ in range(8)] * 2
    loader = torch.utils.data.DataLoader(
        examples, batch_size=8, num_workers=2, collate_fn=_dynamic(seed=5)
    )
    b0, b1 = list(loader)
    assert torch.equal(b0["next_sentence_label"], b1["next_sentence_label"])
    assert not torch.equal(b0["input_ids"], b1["input_ids"])


def test_the_masking_rule_is_googles():
    """One rule for static examples and the collator: count per sequence and 80/10/10."""
    lengths = np.array([1, 6, 7, 10, 128, 512])
    assert num_to_predict(lengths, 0.15, 20).tolist() == [1, 1, 1, 2, 19, 20]  # round half even
    rng = np.random.default_rng(0)
    original = np.full(100_000, 7)
    new = corrupt(original, rng.random(100_000), rng.integers(100, 200, 100_000), MASK)
    assert np.mean(new == MASK) == pytest.approx(0.8, abs=0.005)
    assert np.mean(new == 7) == pytest.approx(0.1, abs=0.005)
    assert np.mean(new >= 100) == pytest.approx(0.1, abs=0.005)


def test_next_token_undoes_static_masks_and_shifts_the_labels():
    rng = np.random.default_rng(3)
    plain = [_example(4, 3, rng), _example(6, 5, rng)]
    masked = []
    for e in plain:  # positions 2 and 4 shown as [MASK], the originals in masked_lm_ids
        ids = e["input_ids"].copy()
        originals = ids[[2, 4]].copy()
        ids[[2, 4]] = MASK
        masked.append(
            {
                **e,
                "input_ids": ids,
                "masked_lm_positions": np.array([2, 4]),
                "masked_lm_ids": originals,
            }
        )
    batch = PretrainingCollator(pad_token_id=PAD, next_token=True)(masked)
    for row, e in enumerate(plain):
        n = len(e["input_ids"])
        assert batch["input_ids"][row, :n].tolist() == e["input_ids"].tolist()  # no [MASK] left
        assert batch["masked_lm_labels"][row, : n - 1].tolist() == e["input_ids"][1:].tolist()
        assert (batch["masked_lm_labels"][row, n - 1 :] == IGNORE_INDEX).all()  # padding
    width = batch["input_ids"].shape[1]
    assert batch["masked_lm_positions"].tolist() == [list(range(width - 1))] * 2
    with pytest.raises(ValueError, match="no dynamic_masking"):
        PretrainingCollator(
            pad_token_id=PAD,
            mask_token_id=MASK,
            vocab_size=VOCAB,
            dynamic_masking=True,
            next_token=True,
        )
