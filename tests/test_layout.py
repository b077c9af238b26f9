"""The layout tells the architecture: the ML packages work without Kedro."""

from __future__ import annotations

import subprocess
import sys


def _python(script: str, cwd) -> None:
    """Runs `script` in a fresh interpreter (a clean sys.modules); fails with its error."""
    run = subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]


def test_ml_packages_import_without_kedro(project_root):
    script = (
        "import sys\n"
        "sys.modules['kedro'] = None  # any `import kedro...` now fails\n"
        "import bert_pipeline.data.stages, bert_pipeline.data.examples\n"
        "import bert_pipeline.glue.finetune, bert_pipeline.glue.report\n"
        "import bert_pipeline.training.trainer, bert_pipeline.training.launch\n"
        "import bert_pipeline.model.checkpoint\n"
    )
    _python(script, project_root)


def test_settings_import_no_heavy_library(project_root):
    """Every `kedro` command, `kedro --help` included, reads the settings, the hooks they
    register and the project's cli.py: torch, lightning, mlflow and dask load only when a run
    needs them (they made every command take 7-9 s to start)."""
    script = (
        "import sys\n"
        "import bert_pipeline.settings, bert_pipeline.cli\n"
        "heavy = ('torch', 'lightning', 'mlflow', 'kedro_mlflow', 'dask', 'pandas')\n"
        "loaded = [m for m in heavy if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    _python(script, project_root)


def test_no_parameter_interpolates_another_parameter(project_root):
    """Kedro resolves each environment's interpolations before merging the environments: a
    `${pretrain_data...}` copy in base would keep base's value when an environment (conf/budget)
    overrides the original. Settings that must agree are read from the data instead."""
    import re

    allowed = ("runtime_params:", "globals:", "oc.env:")
    for path in sorted((project_root / "conf").glob("*/parameters*.yml")):
        for match in re.finditer(r"\$\{([^}]*)\}", path.read_text(encoding="utf-8")):
            assert match.group(1).strip().startswith(allowed), f"{path}: {match.group(0)}"


def test_pipelines_do_not_depend_on_settings_or_hooks(project_root):
    """Pipeline construction reads no hook state: building every pipeline imports neither the
    project settings nor the hooks, and importing the hooks builds no pipeline."""
    build = (
        "import sys\n"
        "from bert_pipeline.pipeline_registry import register_pipelines\n"
        "pipelines = register_pipelines()\n"
        "assert 'bert_pipeline.settings' not in sys.modules, 'settings imported'\n"
        "assert not [m for m in sys.modules if m.startswith('bert_pipeline.hooks')], 'hooks'\n"
        "assert {n.namespace for n in pipelines['finetune_glue'].nodes} >= {'rte', 'stsb'}\n"
    )
    hooks = (
        "import sys\n"
        "import bert_pipeline.hooks\n"
        "built = [m for m in sys.modules if m.startswith('bert_pipeline.pipeline')]\n"
        "assert not built, built\n"
    )
    for script in (build, hooks):
        _python(script, project_root)


def test_pipelines_and_their_parameter_check_import_no_ml_framework(project_root):
    """A refused run stops at the parameter check, which builds the pipelines and parses every
    parameter: neither may load torch, lightning, dask's dataframe or matplotlib (they made a
    refused `kedro run` take 10 s); the nodes import them when they run."""
    script = (
        "import sys\n"
        "from bert_pipeline.pipeline_registry import register_pipelines\n"
        "from bert_pipeline.hooks.run_guard import PARAMETER_PARSERS, _parser\n"
        "import bert_pipeline.glue.config\n"
        "register_pipelines()\n"
        "parsers = [_parser(path) for path in PARAMETER_PARSERS.values()]\n"
        "heavy = ('torch', 'lightning', 'dask.dataframe', 'matplotlib', 'transformers')\n"
        "loaded = [m for m in heavy if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    _python(script, project_root)
