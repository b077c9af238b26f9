"""Kedro project settings."""

from kedro.config import OmegaConfigLoader
from omegaconf.resolvers import oc

CONFIG_LOADER_CLASS = OmegaConfigLoader
CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    # oc.env lets tests and CI point MLflow and data paths elsewhere without editing conf/.
    "custom_resolvers": {"oc.env": oc.env},
    "config_patterns": {"mlflow": ["mlflow*", "mlflow*/**"]},
    # An environment (conf/budget) lists only the keys it changes: merged into base key by key.
    "merge_strategy": {"parameters": "soft", "catalog": "soft"},
}

# mlflow and kedro-mlflow set their own log levels when imported: apply conf/logging.yml again.
import kedro_mlflow  # noqa: E402, F401
import mlflow  # noqa: E402, F401
from kedro.framework.project import LOGGING  # noqa: E402

LOGGING.configure(LOGGING.data)

from bert_pipeline.hooks import DaskClusterHooks, RunGuardHooks, TrackingHooks  # noqa: E402

HOOKS = (RunGuardHooks(), TrackingHooks(), DaskClusterHooks())
