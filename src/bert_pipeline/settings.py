"""Kedro project settings."""

from pathlib import Path

from kedro.config import OmegaConfigLoader
from kedro.utils import find_kedro_project
from omegaconf.resolvers import oc

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

# mlflow, kedro-mlflow and lightning set their own log levels and handlers when imported: apply
# conf/logging.yml again after them. MLflow's per-file download bars (logging a model) are noise.
import os  # noqa: E402

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

import kedro_mlflow  # noqa: E402, F401
import lightning.pytorch  # noqa: E402, F401
import mlflow  # noqa: E402, F401
from kedro.framework.project import LOGGING  # noqa: E402

LOGGING.configure(LOGGING.data)

import logging  # noqa: E402

from bert_pipeline.log_filters import DropMessages  # noqa: E402

# Lightning's "Tip: try litlogger" on every fit, through the rank-zero logger of whichever
# Lightning distribution (lightning, or pytorch_lightning / lightning_fabric, which other packages
# pull in) was imported last. Kedro's logging.yml only builds filters from modules allow-listed in
# an environment variable, so they are attached here.
for _package in ("lightning.pytorch", "lightning.fabric", "pytorch_lightning", "lightning_fabric"):
    logging.getLogger(f"{_package}.utilities.rank_zero").addFilter(DropMessages(["💡 Tip:"]))

from bert_pipeline.hooks import DaskClusterHooks, RunGuardHooks, TrackingHooks  # noqa: E402

HOOKS = (RunGuardHooks(), TrackingHooks(), DaskClusterHooks())
