"""Examples table -> resumable, rank-sharded batches for Lightning.

Why not a plain DataLoader: an interrupted run must continue at the exact batch where it stopped
(not at the start of the epoch), across ranks, with the same masks. The batch sampler below
derives the order of every epoch and the masking seed of every batch from (seed, epoch, batch,
rank) alone, and the loader exposes `state_dict`/`load_state_dict`, which Lightning (>= 2.2)
stores in its checkpoints for stateful dataloaders.

Length buckets (`length_buckets`, NVIDIA LDDL's "binning"): each batch draws its rows from one
band of lengths and is padded to the band's bound, so short examples stop paying for 128
tokens of padding.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import lightning.pytorch as pl
import numpy as np
import pandas as pd
import pyarrow as pa
import torch
from torch.utils.data import DataLoader, Dataset

from bert_pipeline.data.collator import PretrainingCollator
from bert_pipeline.data.masking import (
    DYNAMIC,
    MASKED_LM_PROB,
    MAX_PREDICTIONS_PER_SEQ,
    STATIC,
    num_to_predict,
)

logger = logging.getLogger(__name__)

LIST_COLUMNS = ("input_ids", "token_type_ids", "masked_lm_positions", "masked_lm_ids")
REQUIRED_COLUMNS = (*LIST_COLUMNS, "next_sentence_label")
_VALIDATION_STREAM = 2**31 - 1  # seed-sequence key that keeps validation masks apart from training
_BATCH_ORDER_STREAM = 1  # seed-sequence key of the order of length-bucket batches


def _batch_seed(*keys: int) -> int:
    return int(np.random.SeedSequence([int(k) for k in keys]).generate_state(1, np.uint32)[0])


class ExampleTable:
    """Row access to the examples table without copying it.

    A memory-mapped table (`ExampleShards.table()`) stays memory-mapped: every chunk keeps its
    own values and offsets, and a row is read from the chunk that holds it, so a training
    process touches only the rows it batches. What is held per row is small: the label, the
    length and a 64-bit document key for the validation split.
    """

    def __init__(
        self, examples: pd.DataFrame | pa.Table, release_pages: Callable[[], None] | None = None
    ) -> None:
        self.release_pages = release_pages
        table = (
            examples
            if isinstance(examples, pa.Table)
            else pa.Table.from_pandas(examples, preserve_index=False)
        )
        missing = [c for c in REQUIRED_COLUMNS if c not in table.column_names]
        if missing:
            raise ValueError(
                f"examples table lacks column(s) {missing}; found {table.column_names}"
            )
        if table.num_rows == 0:
            raise ValueError("examples table is empty: nothing to train on")
        ids = table.column("input_ids")
        self._chunk_start = np.cumsum([0] + [len(c) for c in ids.chunks], dtype=np.int64)
        self._lists: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        for name in LIST_COLUMNS:
            chunks = []
            for chunk in table.column(name).chunks:
                offsets = chunk.offsets.to_numpy(zero_copy_only=False)
                chunks.append((chunk.values.to_numpy(zero_copy_only=False), offsets))
            self._lists[name] = chunks
        self.next_sentence_label = table.column("next_sentence_label").to_numpy().astype(np.int8)
        self.doc_keys = (
            np.concatenate([_hash_strings(c) for c in table.column("a_doc_id").chunks])
            if "a_doc_id" in table.column_names
            else None
        )
        self.num_rows = table.num_rows
        self._lengths: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return self.num_rows

    def row(self, i: int) -> dict[str, Any]:
        c = int(np.searchsorted(self._chunk_start, i, side="right")) - 1
        j = i - int(self._chunk_start[c])
        out: dict[str, Any] = {}
        for name, chunks in self._lists.items():
            values, offsets = chunks[c]
            out[name] = values[offsets[j] : offsets[j + 1]]
        out["next_sentence_label"] = int(self.next_sentence_label[i])
        return out

    def lengths(self, name: str = "input_ids") -> np.ndarray:
        """Per-row lengths of a list column, computed once (the model config, the length buckets
        and the masked-token count all read them at start-up); read-only, as it is shared."""
        if name not in self._lengths:
            lengths = np.concatenate([np.diff(offsets) for _, offsets in self._lists[name]])
            lengths.flags.writeable = False
            self._lengths[name] = lengths
        return self._lengths[name]

    def has_static_masks(self) -> bool:
        return any(offsets[-1] > offsets[0] for _, offsets in self._lists["masked_lm_positions"])


def _hash_strings(chunk: pa.Array) -> np.ndarray:
    return pd.util.hash_array(np.asarray(chunk.to_numpy(zero_copy_only=False), dtype=object))


def split_indices(
    table: ExampleTable, val_split: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Held-out examples for validation: whole documents (by `a_doc_id`) so A-segments never leak.

    `val_split` < 1 is a fraction of the examples, >= 1 a number of examples (rounded to documents).
    """
    n = len(table)
    target = int(round(val_split * n)) if val_split < 1 else int(val_split)
    target = max(1, min(target, n - 1)) if n > 1 else 0
    if n < 2:
        raise ValueError(f"need at least 2 examples to hold some out for validation, got {n}")
    rng = np.random.default_rng(seed)
    if table.doc_keys is None:
        order = rng.permutation(n)
        return np.sort(order[target:]), np.sort(order[:target])
    _, inverse, counts = np.unique(table.doc_keys, return_inverse=True, return_counts=True)
    held, total = [], 0
    for d in rng.permutation(len(counts)):
        if total >= target:
            break
        if total + counts[d] >= n:  # never hold out everything
            continue
        held.append(d)
        total += int(counts[d])
    val_mask = np.isin(inverse, held)
    return np.flatnonzero(~val_mask), np.flatnonzero(val_mask)


class BatchRequest(NamedTuple):
    """What the sampler hands the dataset: example indices and the seed of this batch's masks."""

    seed: int
    indices: list[int]
    width: int = 0  # pad to this many tokens (the bucket's bound); 0: the longest row, rounded


class PretrainingDataset(Dataset):
    """Rows of an `ExampleTable`, fetched a whole `BatchRequest` at a time."""

    def __init__(self, table: ExampleTable) -> None:
        self.table = table

    def __len__(self) -> int:
        return len(self.table)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.table.row(int(i))

    def __getitems__(self, request: BatchRequest) -> tuple[BatchRequest, list[dict[str, Any]]]:
        if self.table.release_pages is not None:  # the previous batch's pages of the map
            self.table.release_pages()
        return request, [self.table.row(int(i)) for i in request.indices]


class SeededCollate:
    """Runs `PretrainingCollator` with the batch's own seed (masks do not depend on call order)
    and width."""

    def __init__(self, **collator_kwargs: Any) -> None:
        self.collator_kwargs = collator_kwargs

    def __call__(self, item: tuple[BatchRequest, list[dict[str, Any]]]) -> dict[str, torch.Tensor]:
        request, rows = item
        collate = PretrainingCollator(
            **self.collator_kwargs, seed=request.seed, pad_to_length=request.width or None
        )
        return collate(rows)


class ResumableBatchSampler:
    """Yields `BatchRequest`s of this rank's share of a per-epoch permutation.

    Every rank walks the same permutation (seeded by seed + epoch), padded by wrap-around to a
    multiple of world_size like `DistributedSampler`, and takes every world_size-th example.
    With `buckets` (ascending bounds, the last one holding every example; `lengths` per example
    index) the permutation is cut into steps of world_size x batch_size examples of one bucket,
    in permutation order, then the remainders of all buckets together at the last bound; the
    steps are shuffled and each rank takes its rows of each: as many batches as without, each
    example at most once, and one width per step on all ranks.
    `consumed` counts batches the training loop actually used (not the ones prefetched), which is
    what a resumed run must skip.
    """

    def __init__(
        self,
        indices: Sequence[int],
        batch_size: int,
        seed: int,
        shuffle: bool,
        drop_last: bool,
        rank: int = 0,
        world_size: int = 1,
        stream: int = 0,
        lengths: np.ndarray | None = None,
        buckets: Sequence[int] | None = None,
    ) -> None:
        self.indices = np.asarray(indices, dtype=np.int64)
        self.buckets = np.asarray(buckets or [], dtype=np.int64)
        self.lengths = lengths
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.rank = int(rank)
        self.world_size = int(world_size)
        self.stream = int(stream)
        self.epoch = 0
        self.consumed = 0
        if len(self) == 0:
            raise ValueError(
                f"{len(self.indices)} examples over {self.world_size} rank(s) do not fill one "
                f"batch of batch_size={self.batch_size}; lower pretrain_model.batch_size"
            )

    def _per_rank(self) -> int:
        return -(-len(self.indices) // self.world_size)

    def __len__(self) -> int:
        per_rank = self._per_rank()
        if self.drop_last:
            return per_rank // self.batch_size
        return -(-per_rank // self.batch_size)

    def _epoch_order(self, epoch: int) -> np.ndarray:
        """Every rank's examples of the epoch: the permutation, padded to a multiple of
        world_size; rank r's share is every world_size-th, from r."""
        order = self.indices
        if self.shuffle:
            rng = np.random.default_rng([self.seed, epoch])
            order = order[rng.permutation(len(order))]
        total = self._per_rank() * self.world_size
        if total > len(order):
            order = np.concatenate([order, order[: total - len(order)]])
        return order

    def epoch_batches(self, epoch: int) -> list[tuple[np.ndarray, int]]:
        """(example indices, width) of every batch of this rank's epoch, in training order."""
        order, size, world = self._epoch_order(epoch), self.batch_size, self.world_size
        if not len(self.buckets):
            mine = order[self.rank :: world]
            return [(mine[b * size : (b + 1) * size], 0) for b in range(len(self))]
        # Steps of all ranks together, so that every rank's batch of a step has the same width
        # (DDP waits for the slowest); rank r takes every world-th row of each.
        step = size * world
        bucket = np.searchsorted(self.buckets, self.lengths[order])  # the first bound >= length
        steps, rest = [], []
        for k, bound in enumerate(self.buckets.tolist()):
            members = order[bucket == k]
            full = len(members) // step * step
            steps += [(members[i : i + step], bound) for i in range(0, full, step)]
            rest.append(members[full:])
        rest = np.concatenate(rest)
        last = int(self.buckets[-1])
        steps += [(rest[i : i + step], last) for i in range(0, len(rest), step)]
        steps = steps[: len(self)]  # drop_last: the short remainder goes
        if self.shuffle:  # its own stream: [seed, epoch] alone would replay the permutation's
            rng = np.random.default_rng([self.seed, epoch, _BATCH_ORDER_STREAM])
            steps = [steps[i] for i in rng.permutation(len(steps))]
        return [(rows[self.rank :: world], width) for rows, width in steps]

    def __iter__(self) -> Iterator[BatchRequest]:
        if self.consumed >= len(self):  # the previous epoch was used up: start the next one
            self.epoch += 1
            self.consumed = 0
        epoch, start = self.epoch, self.consumed
        batches = self.epoch_batches(epoch)
        for b in range(start, len(self)):
            chunk, width = batches[b]
            seed = _batch_seed(self.seed, self.stream, epoch, b, self.rank)
            yield BatchRequest(seed, chunk.tolist(), width)

    def state_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "consumed": self.consumed,
            "world_size": self.world_size,
            "length_buckets": self.buckets.tolist(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("world_size", self.world_size) != self.world_size:
            logger.warning(
                "resuming with %d rank(s) from a checkpoint written with %d: the data order of the "
                "current epoch changes",
                self.world_size,
                state["world_size"],
            )
        if state.get("length_buckets", []) != self.buckets.tolist():
            logger.warning(
                "resuming with length_buckets %s from a checkpoint written with %s: the data order "
                "of the current epoch changes",
                self.buckets.tolist() or None,
                state.get("length_buckets") or None,
            )
        self.epoch = int(state["epoch"])
        self.consumed = int(state["consumed"])


class ResumableDataLoader(DataLoader):
    """A DataLoader whose position Lightning saves/restores (the `_Stateful` protocol)."""

    def state_dict(self) -> dict[str, Any]:
        return self.batch_sampler.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.batch_sampler.load_state_dict(state)


def resolve_dynamic_masking(table: ExampleTable, masking: str) -> bool:
    """Static masks from the data pipeline or fresh masks per batch; checks the table agrees."""
    has_masks = table.has_static_masks()
    if masking == "auto":
        return not has_masks
    if masking == STATIC and not has_masks:
        raise ValueError(
            "pretrain_model.masking=static but the examples table has no masked positions "
            "(it was written with dynamic masking); use masking: dynamic or auto"
        )
    if masking == DYNAMIC and has_masks:
        raise ValueError(
            "pretrain_model.masking=dynamic but the examples table already holds static masks "
            "([MASK] in input_ids); use masking: static or auto"
        )
    return masking == DYNAMIC


class PretrainingDataModule(pl.LightningDataModule):
    """Train/validation loaders over the examples table; sharded by rank, resumable mid-epoch."""

    def __init__(
        self,
        examples: pd.DataFrame | pa.Table | ExampleTable,
        *,
        pad_token_id: int,
        mask_token_id: int,
        vocab_size: int,
        special_token_ids: Sequence[int],
        batch_size: int,
        val_split: float,
        seed: int,
        masking: str = "auto",
        masked_lm_prob: float = MASKED_LM_PROB,
        max_predictions_per_seq: int = MAX_PREDICTIONS_PER_SEQ,
        pad_to_multiple_of: int | None = 8,
        num_workers: int = 0,
        next_token: bool = False,
        length_buckets: Sequence[int] | None = None,
        continuation: np.ndarray | None = None,
    ) -> None:
        super().__init__()
        self.table = examples if isinstance(examples, ExampleTable) else ExampleTable(examples)
        self.length_buckets = self._buckets(list(length_buckets or []))
        self.batch_size = batch_size
        self.seed = seed
        self.num_workers = num_workers
        # a left-to-right LM reads the unmasked text: no masks drawn, static ones undone
        self.dynamic_masking = not next_token and resolve_dynamic_masking(self.table, masking)
        self.collate = SeededCollate(
            pad_token_id=pad_token_id,
            mask_token_id=mask_token_id,
            vocab_size=vocab_size,
            special_token_ids=list(special_token_ids),
            dynamic_masking=self.dynamic_masking,
            masked_lm_prob=masked_lm_prob,
            max_predictions_per_seq=max_predictions_per_seq,
            pad_to_multiple_of=pad_to_multiple_of,
            next_token=next_token,
            continuation=continuation if self.dynamic_masking else None,
        )
        self.train_indices, self.val_indices = split_indices(self.table, val_split, seed)
        self.dataset = PretrainingDataset(self.table)
        self._train_loader: ResumableDataLoader | None = None

    def masked_tokens_per_step(self) -> float:
        """The mean number of masked tokens in a training batch, over the training set (dynamic
        masks: google's count per length, before the rare cap by maskable tokens; whole words fill
        it too, as one-piece words fit the last slots: no row of 6,400 Wikipedia examples fell
        short)."""
        if self.dynamic_masking:
            rule = self.collate.collator_kwargs  # the rate and cap the collator masks with
            per_row = num_to_predict(
                self.table.lengths()[self.train_indices],
                rule["masked_lm_prob"],
                rule["max_predictions_per_seq"],
            )
        else:
            per_row = self.table.lengths("masked_lm_positions")[self.train_indices]
        return float(per_row.mean()) * self.batch_size

    def _buckets(self, bounds: list[int]) -> list[int]:
        """`bounds` with those above the longest example cut to it (examples of 64 tokens under
        bounds meant for 128 make one bucket); none may end below it."""
        if not bounds:
            return []
        longest = int(self.table.lengths().max())
        if longest > bounds[-1]:
            raise ValueError(
                f"parameter pretrain_model.length_buckets: the examples reach {longest} tokens, "
                f"above its last bound {bounds[-1]}; end it at the examples' max_seq_length"
            )
        return sorted({min(bound, longest) for bound in bounds})

    def _rank_world(self) -> tuple[int, int]:
        trainer = self.trainer
        if trainer is None:
            return 0, 1
        return trainer.global_rank, trainer.world_size

    def _loader_kwargs(self) -> dict[str, Any]:
        # Its own generator: creating a loader iterator must not draw from the global torch RNG,
        # whose state (dropout) is checkpointed and restored for an exact resume.
        return dict(
            collate_fn=self.collate,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
            generator=torch.Generator().manual_seed(self.seed),
        )

    def _loader(self, sampler: ResumableBatchSampler) -> ResumableDataLoader:
        return ResumableDataLoader(self.dataset, batch_sampler=sampler, **self._loader_kwargs())

    def train_dataloader(self) -> ResumableDataLoader:
        if self._train_loader is None:  # one loader for the whole fit, so its position persists
            rank, world = self._rank_world()
            sampler = ResumableBatchSampler(
                self.train_indices,
                self.batch_size,
                self.seed,
                shuffle=True,
                drop_last=True,
                rank=rank,
                world_size=world,
                lengths=self.table.lengths() if self.length_buckets else None,
                buckets=self.length_buckets,
            )
            self._train_loader = self._loader(sampler)
        return self._train_loader

    def val_dataloader(self) -> DataLoader:
        rank, world = self._rank_world()
        sampler = ResumableBatchSampler(
            self.val_indices,
            self.batch_size,
            self.seed,
            shuffle=False,
            drop_last=False,
            rank=rank,
            world_size=world,
            stream=_VALIDATION_STREAM,
        )
        # Validation always reads epoch 0: the same examples and masks at every evaluation.
        return DataLoader(self.dataset, batch_sampler=_FixedEpoch(sampler), **self._loader_kwargs())

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        # Called once for each batch the training step is about to use: the true data position.
        if self.trainer is not None and self.trainer.training and self._train_loader is not None:
            self._train_loader.batch_sampler.consumed += 1
        return batch


class _FixedEpoch:
    """Wraps a sampler so that every iteration replays its epoch 0 (for validation)."""

    def __init__(self, sampler: ResumableBatchSampler) -> None:
        self.sampler = sampler

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self) -> Iterator[BatchRequest]:
        self.sampler.epoch, self.sampler.consumed = 0, 0
        return iter(self.sampler)
