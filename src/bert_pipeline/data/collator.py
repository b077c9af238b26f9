"""Batching of pretraining examples into padded torch tensors, with optional dynamic masking.

Static mode pads examples whose masks were drawn once by `create_examples` (google's
`create_pretraining_data.py`). Dynamic mode (RoBERTa-style) draws fresh 80/10/10 masks on every
call with the same selection rule as google: `min(max_predictions_per_seq, max(1, round(n * p)))`
positions per sequence, where `n` is the unpadded length, chosen uniformly among non-special tokens
or, given the vocabulary's `##` pieces, among whole words (google's whole-word rule).
Next-token mode (a left-to-right LM) restores the original tokens and asks every position for
the token after it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from bert_pipeline.data.masking import (
    MASKED_LM_PROB,
    MAX_PREDICTIONS_PER_SEQ,
    corrupt,
    masking_rules,
    num_to_predict,
    take_whole_words,
    word_starts,
)
from bert_pipeline.model.bert import IGNORE_INDEX


class PretrainingCollator:
    """Turns a list of example rows (see the examples table contract) into a batch dict of tensors.

    Deterministic: dynamic masks depend only on `seed`, the number of previous calls and, inside
    a DataLoader worker, the worker id (each worker has its own stream, so workers never repeat
    each other's masks).
    """

    def __init__(
        self,
        pad_token_id: int = 0,
        mask_token_id: int | None = None,
        vocab_size: int | None = None,
        special_token_ids: Iterable[int] = (),
        dynamic_masking: bool = False,
        masked_lm_prob: float = MASKED_LM_PROB,
        max_predictions_per_seq: int = MAX_PREDICTIONS_PER_SEQ,
        pad_to_multiple_of: int | None = 8,
        seed: int = 0,
        next_token: bool = False,
        pad_to_length: int | None = None,
        continuation: np.ndarray | None = None,
    ) -> None:
        if dynamic_masking and next_token:
            raise ValueError("next_token reads the unmasked text: no dynamic_masking with it")
        if dynamic_masking:
            if mask_token_id is None or vocab_size is None:
                raise ValueError("dynamic_masking=True needs mask_token_id and vocab_size")
            values = (masked_lm_prob, max_predictions_per_seq)
            rules = masking_rules(*values)
            for (name, ok, why), value in zip(rules, values, strict=True):
                if not ok:
                    raise ValueError(f"{name} {why}, got {value}")
        self.pad_token_id = int(pad_token_id)
        self.mask_token_id = None if mask_token_id is None else int(mask_token_id)
        self.vocab_size = None if vocab_size is None else int(vocab_size)
        self.special_token_ids = sorted({int(t) for t in special_token_ids} | {self.pad_token_id})
        self.dynamic_masking = bool(dynamic_masking)
        self.masked_lm_prob = float(masked_lm_prob)
        self.max_predictions_per_seq = int(max_predictions_per_seq)
        self.pad_to_multiple_of = pad_to_multiple_of
        self.seed = int(seed)
        self.next_token = bool(next_token)
        self.pad_to_length = pad_to_length
        # bool per vocabulary id, True for a `##` piece: dynamic masks take whole words
        self.continuation = None if continuation is None else np.asarray(continuation, dtype=bool)
        self._generator: torch.Generator | None = None
        self._worker_id: int | None = None

    def _rng(self) -> torch.Generator:
        """Generator for this process; DataLoader workers get distinct seeds (seed, worker id)."""
        info = torch.utils.data.get_worker_info()
        worker_id = -1 if info is None else info.id
        if self._generator is None or worker_id != self._worker_id:
            seed = self.seed
            if worker_id >= 0:
                state = np.random.SeedSequence([self.seed, worker_id]).generate_state(1, np.uint64)
                seed = int(state[0] >> np.uint64(1))
            self._generator = torch.Generator().manual_seed(seed)
            self._worker_id = worker_id
        return self._generator

    def __call__(self, examples: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        if len(examples) == 0:
            raise ValueError("PretrainingCollator got an empty list of examples")
        ids = [np.asarray(e["input_ids"], dtype=np.int64) for e in examples]
        lengths = np.array([len(x) for x in ids], dtype=np.int64)
        width = int(lengths.max())
        if self.pad_to_multiple_of:
            m = int(self.pad_to_multiple_of)
            width = -(-width // m) * m
        if self.pad_to_length:
            if lengths.max() > self.pad_to_length:
                raise ValueError(
                    f"a row of {int(lengths.max())} tokens does not fit pad_to_length="
                    f"{self.pad_to_length}"
                )
            width = int(self.pad_to_length)
        batch = len(examples)
        input_ids = np.full((batch, width), self.pad_token_id, dtype=np.int64)
        token_type_ids = np.zeros((batch, width), dtype=np.int64)
        for row, (e, x) in enumerate(zip(examples, ids, strict=True)):
            input_ids[row, : len(x)] = x
            token_type_ids[row, : len(x)] = np.asarray(e["token_type_ids"], dtype=np.int64)
        attention_mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
        nsp = np.array([int(e["next_sentence_label"]) for e in examples], dtype=np.int64)

        out = {
            "input_ids": torch.from_numpy(input_ids),
            "token_type_ids": torch.from_numpy(token_type_ids),
            "attention_mask": torch.from_numpy(attention_mask),
            "next_sentence_label": torch.from_numpy(nsp),
        }
        if self.next_token:
            positions, labels = self._next_tokens(out, examples)
        elif self.dynamic_masking:
            positions, labels = self._mask_dynamic(out["input_ids"], out["attention_mask"])
        else:
            positions, labels = self._static_masks(examples, self._min_predictions())
        out["masked_lm_positions"] = positions
        out["masked_lm_labels"] = labels
        return out

    def _min_predictions(self) -> int:
        """The prediction width a full row of `pad_to_length` tokens needs (1 without it)."""
        if not self.pad_to_length:
            return 1
        n = num_to_predict([self.pad_to_length], self.masked_lm_prob, self.max_predictions_per_seq)
        return int(n[0])

    @staticmethod
    def _static_masks(
        examples: Sequence[Mapping[str, Any]], min_width: int = 1
    ) -> tuple[torch.Tensor, torch.Tensor]:
        pos = [np.asarray(e["masked_lm_positions"], dtype=np.int64) for e in examples]
        lab = [np.asarray(e["masked_lm_ids"], dtype=np.int64) for e in examples]
        width = max(min_width, max(len(p) for p in pos))
        positions = np.zeros((len(examples), width), dtype=np.int64)
        labels = np.full((len(examples), width), IGNORE_INDEX, dtype=np.int64)
        for row, (p, y) in enumerate(zip(pos, lab, strict=True)):
            if len(p) != len(y):
                raise ValueError(
                    f"example {row}: {len(p)} masked_lm_positions but {len(y)} masked_lm_ids"
                )
            positions[row, : len(p)] = p
            labels[row, : len(y)] = y
        return torch.from_numpy(positions), torch.from_numpy(labels)

    def _next_tokens(
        self, batch: dict[str, torch.Tensor], examples: Sequence[Mapping[str, Any]]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Undoes static masks in place; returns ([B, T-1] positions 0..T-2, the token after
        each position, IGNORE_INDEX where that is padding)."""
        input_ids = batch["input_ids"]
        if examples and "masked_lm_positions" in examples[0]:
            positions, originals = self._static_masks(examples)
            rows = torch.arange(len(examples))[:, None].expand_as(positions)
            real = originals != IGNORE_INDEX
            input_ids[rows[real], positions[real]] = originals[real]
        width = input_ids.shape[1]
        labels = input_ids[:, 1:].masked_fill(batch["attention_mask"][:, 1:] == 0, IGNORE_INDEX)
        return torch.arange(width - 1).expand(len(examples), width - 1).clone(), labels

    def _mask_dynamic(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Masks `input_ids` in place; returns ([B,P] positions, [B,P] original ids / -100)."""
        gen = self._rng()
        specials = torch.tensor(self.special_token_ids, dtype=input_ids.dtype)
        maskable = (attention_mask == 1) & ~torch.isin(input_ids, specials)
        lengths = attention_mask.sum(dim=1)
        n_predict = num_to_predict(
            lengths.numpy(), self.masked_lm_prob, self.max_predictions_per_seq
        )
        if self.continuation is not None:
            selected = self._whole_words(input_ids, maskable, n_predict, gen)
            n_predict = selected.sum(dim=1)
        else:
            n_predict = torch.minimum(torch.from_numpy(n_predict), maskable.sum(dim=1))
            # n_predict[b] maskable positions, uniformly: rank random scores, the others last
            scores = torch.rand(input_ids.shape, generator=gen)
            scores[~maskable] = 2.0
            rank = scores.argsort(dim=1).argsort(dim=1)
            selected = rank < n_predict[:, None]

        width = max(self._min_predictions(), int(n_predict.max()))
        positions = torch.zeros((input_ids.shape[0], width), dtype=torch.long)
        labels = torch.full((input_ids.shape[0], width), IGNORE_INDEX, dtype=torch.long)
        rows, cols = selected.nonzero(as_tuple=True)  # row-major, so columns come out sorted
        slot = torch.arange(rows.numel()) - torch.repeat_interleave(
            torch.cumsum(n_predict, 0) - n_predict, n_predict
        )
        positions[rows, slot] = cols
        labels[rows, slot] = input_ids[rows, cols]

        draw = torch.rand(rows.numel(), generator=gen)
        random_ids = torch.randint(0, self.vocab_size, (rows.numel(),), generator=gen)
        new_ids = corrupt(
            input_ids[rows, cols].numpy(), draw.numpy(), random_ids.numpy(), self.mask_token_id
        )
        input_ids[rows, cols] = torch.from_numpy(new_ids)
        return positions, labels

    def _whole_words(
        self,
        input_ids: torch.Tensor,
        maskable: torch.Tensor,
        n_predict: np.ndarray,
        gen: torch.Generator,
    ) -> torch.Tensor:
        """[B, T] the positions of whole words taken in a random order while they fit into
        `n_predict` tokens; the visiting order comes from this collator's stream."""
        ids, can = input_ids.numpy(), maskable.numpy()
        is_start = word_starts(ids, can, self.continuation)
        scores = torch.rand((len(ids), max(1, int(is_start.sum(axis=1).max()))), generator=gen)
        return torch.from_numpy(take_whole_words(is_start, can, scores.double().numpy(), n_predict))
