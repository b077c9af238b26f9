"""Kedro project settings.

Nothing heavy is imported here: every `kedro` command, `kedro --help` included, reads this file,
so torch, lightning and mlflow load only when a run needs them.
"""

import logging
import os
from pathlib import Path

from kedro.config import OmegaConfigLoader
from kedro.utils import find_kedro_project
from omegaconf.resolvers import oc

from bert_pipeline.hooks import (
    ConsoleHooks,
    DaskClusterHooks,
    DataTransactionHooks,
    RunGuardHooks,
    TrackingHooks,
)
from bert_pipeline.log_filters import DropMessages

CONFIG_LOADER_CLASS = OmegaConfigLoader
CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    # oc.env lets tests and CI point MLflow and data paths elsewhere without editing conf/.
    # project_root: the project folder wherever a command or notebook kernel starts inside it,
    # so conf/base/mlflow.yml names the same store from notebooks/ as from the root.
    "custom_resolvers": {
        "oc.env": oc.env,
        "project_root": lambda: (find_kedro_project(Path.cwd()) or Path.cwd()).as_posix(),
    },
    "config_patterns": {"mlflow": ["mlflow*", "mlflow*/**"]},
    # An environment (conf/budget) lists only the keys it changes: merged into base key by key.
    "merge_strategy": {"parameters": "soft", "catalog": "soft"},
}

HOOKS = (
    RunGuardHooks(),
    DataTransactionHooks(),
    TrackingHooks(),
    DaskClusterHooks(),
    ConsoleHooks(),
)

# MLflow would give its loggers their own stderr handler when imported (conf/logging.yml sets
# their level and the console); its per-file download bars (logging a model) are noise.
os.environ.setdefault("MLFLOW_CONFIGURE_LOGGING", "false")
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
# Python warnings go to the `py.warnings` logger, which conf/logging.yml drops.
logging.captureWarnings(True)

# Lightning's "Tip: try litlogger" on every fit, through the rank-zero logger of whichever
# Lightning distribution (lightning, or pytorch_lightning / lightning_fabric, which other packages
# pull in) was imported last. Kedro's logging.yml only builds filters from modules allow-listed in
# an environment variable, so they are attached here, by logger name (nothing is imported).
for _package in ("lightning.pytorch", "lightning.fabric", "pytorch_lightning", "lightning_fabric"):
    logging.getLogger(f"{_package}.utilities.rank_zero").addFilter(DropMessages(["💡 Tip:"]))
