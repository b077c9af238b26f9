"""The layout tells the architecture: the ML packages work without Kedro."""

from __future__ import annotations

import subprocess
import sys


def test_ml_packages_import_without_kedro(project_root):
    script = (
        "import sys\n"
        "sys.modules['kedro'] = None  # any `import kedro...` now fails\n"
        "import bert_pipeline.data.stages, bert_pipeline.data.examples\n"
        "import bert_pipeline.glue.finetune, bert_pipeline.glue.report\n"
        "import bert_pipeline.training.trainer, bert_pipeline.training.launch\n"
        "import bert_pipeline.model.checkpoint\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=project_root, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-2000:]
