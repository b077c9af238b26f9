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
}

from bert_pipeline.hooks import DaskClusterHooks, RunGuardHooks, TrackingHooks  # noqa: E402

HOOKS = (RunGuardHooks(), TrackingHooks(), DaskClusterHooks())
