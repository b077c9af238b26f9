"""Project hooks, one module per concern; none of them changes how a pipeline is built.

- `run_guard`: the `data_dir` lock, every parameter parsed and every input checked before the
  first node, so a run refuses at once instead of failing half-way.
- `data_transaction`: the outputs of a `pretrain_data` run committed together or not at all.
- `tracking`: the MLflow store created safely, the experiment marked as model training, runs
  of killed processes marked KILLED, each pipeline run described.
- `dask_cluster`: the Dask client of the nodes tagged `dask`, closed before any other node.
- `console`: one line per node start and finish, and a summary at the end of a run.

None of them imports torch, lightning, mlflow or dask before a run needs it: `kedro --help`
reads the settings that register them.
"""

from bert_pipeline.hooks.console import ConsoleHooks
from bert_pipeline.hooks.dask_cluster import DaskClusterHooks
from bert_pipeline.hooks.data_transaction import DataTransactionHooks
from bert_pipeline.hooks.run_guard import RunGuardHooks
from bert_pipeline.hooks.tracking import TrackingHooks

__all__ = [
    "ConsoleHooks",
    "DaskClusterHooks",
    "DataTransactionHooks",
    "RunGuardHooks",
    "TrackingHooks",
]
