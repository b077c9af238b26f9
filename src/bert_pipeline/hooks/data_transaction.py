"""A `pretrain_data` run is one transaction: its outputs are committed together or not at all."""

from __future__ import annotations

import os
from pathlib import Path

from kedro.framework.hooks import hook_impl

from bert_pipeline.fsutil import StagedSet

DATA_PIPELINE = "pretrain_data"


def data_set(catalog) -> tuple[set[str], StagedSet]:
    """The datasets the `pretrain_data` pipeline writes to local files (documents, sentences,
    tokenizer, examples, statistics) and their `StagedSet`, journaled in the folder they share
    (`data_dir`). Read from the catalog, so a catalog that moves one moves its staging too."""
    from kedro.framework.project import pipelines

    from bert_pipeline.hooks.run_guard import dataset_path

    paths = {name: dataset_path(catalog, name) for name in pipelines[DATA_PIPELINE].all_outputs()}
    paths = {name: os.path.abspath(path) for name, path in paths.items() if path != "?"}
    journal = Path(os.path.commonpath(list(paths.values()))) / f".{DATA_PIPELINE}.commit"
    return set(paths), StagedSet(paths.values(), journal)


class DataTransactionHooks:
    """Stages the data set while a run's `pretrain_data` nodes write it and commits it once the
    last of the outputs it makes is saved, before any later node (`pretrain_model` in `kedro run
    --pipeline pretrain`) reads it; a failed run drops what it staged. A run that writes none of
    the set leaves it alone (the run guard recovers a set it reads)."""

    def __init__(self) -> None:
        self._set: StagedSet | None = None
        self._pending: set[str] = set()

    @hook_impl
    def before_pipeline_run(self, pipeline, catalog) -> None:
        self._close()
        names, staged = data_set(catalog)
        self._pending = names & pipeline.all_outputs()
        if self._pending:
            staged.open()
            self._set = staged

    @hook_impl
    def after_dataset_saved(self, dataset_name: str) -> None:
        self._pending.discard(dataset_name)
        if self._set is not None and not self._pending:
            staged, self._set = self._set, None
            staged.commit()

    @hook_impl
    def on_pipeline_error(self) -> None:
        if self._set is not None:
            staged, self._set = self._set, None
            staged.discard()

    def _close(self) -> None:
        if self._set is not None:
            staged, self._set = self._set, None
            staged.close()
