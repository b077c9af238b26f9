"""The Dask client of the data stages: open only while nodes tagged `dask` run."""

from __future__ import annotations

from typing import Any

from kedro.framework.hooks import hook_impl

DASK_TAG = "dask"
DASK_PARAMS = "params:pretrain_data.dask"


def hook_parameters(pipeline) -> set[str]:
    """The parameters these hooks load for `pipeline`, which no node receives: the run guard
    parses them before the first node, as it does a node's (the cluster is opened later)."""
    return {DASK_PARAMS} if any(DASK_TAG in node.tags for node in pipeline.nodes) else set()


class DaskClusterHooks:
    """Opens the Dask client before the first node tagged `dask` (workers, memory limit or a
    scheduler address from `pretrain_data.dask`) and closes it before any other node, so
    training never shares the machine with idle Dask workers."""

    def __init__(self) -> None:
        self._client: Any = None

    @hook_impl
    def before_node_run(self, node, catalog) -> None:
        if DASK_TAG in node.tags:
            if self._client is None:
                from bert_pipeline.data.cluster import open_client  # dask, when a node needs it

                self._client = open_client(catalog.load(DASK_PARAMS))
        else:
            self._close()

    @hook_impl
    def after_pipeline_run(self) -> None:
        self._close()

    @hook_impl
    def on_pipeline_error(self) -> None:
        self._close()

    def _close(self) -> None:
        if self._client is not None:
            from bert_pipeline.data.cluster import close_client

            client, self._client = self._client, None
            close_client(client)
