"""Checkpoints belong to a run, a resume never starts over unasked, a SIGTERM fails the run, a
failed write tears no checkpoint, and damaged checkpoint files are named with their parameter."""

from __future__ import annotations

import builtins
import errno
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project
from lightning.pytorch import Callback
from lightning.pytorch.trainer.states import TrainerFn

from bert_pipeline.model import BertConfig, BertForPreTraining
from bert_pipeline.model.checkpoint import save_pretrained
from bert_pipeline.params import ConfigError
from bert_pipeline.training.core import StoppedBySignal
from bert_pipeline.training.trainer import run_training
from tests.training.test_training import KillAt, tiny_config


class _WeightsAtStart(Callback):
    def on_train_start(self, trainer, pl_module):
        self.state = {k: v.clone() for k, v in pl_module.model.state_dict().items()}


def test_resume_continues_the_latest_run_never_an_older_one(
    tmp_path, tiny_tokenizer, tiny_examples
):
    run_training(tiny_examples, tiny_tokenizer, tiny_config(tmp_path, seed=1))  # run A
    run_training(tiny_examples, tiny_tokenizer, tiny_config(tmp_path, seed=2))  # run B
    folder = tmp_path / "ckpt"
    last_b = torch.load(folder / "last.ckpt", weights_only=True)
    assert sorted(p.name for p in folder.glob("*.ckpt")) == ["last.ckpt", "step-6.ckpt"]
    (archived,) = (folder / "archive").iterdir()  # run A's checkpoints, out of resume's way
    assert {p.name for p in archived.iterdir()} == {"last.ckpt", "step-6.ckpt"}

    start = _WeightsAtStart()
    cfg = tiny_config(tmp_path, seed=2, resume=True, max_steps=9)
    resumed = run_training(tiny_examples, tiny_tokenizer, cfg, extra_callbacks=[start])
    assert resumed.metrics["global_step"] == 9
    for name, value in start.state.items():
        assert torch.equal(value, last_b["state_dict"][f"model.{name}"]), name


def test_damaged_checkpoint_files_are_named_with_their_parameter(
    tmp_path, tiny_tokenizer, tiny_examples
):
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"PK\x03\x04 not a checkpoint")
    with pytest.raises(ConfigError, match=rf"pretrain_model.resume: {bad} is not a read"):
        run_training(tiny_examples, tiny_tokenizer, tiny_config(tmp_path, resume=str(bad)))

    config = BertConfig.from_preset("tiny", vocab_size=200, max_position_embeddings=64)
    folder = save_pretrained(BertForPreTraining(config), tmp_path / "init")
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    cfg = tiny_config(tmp_path, init_from=str(folder), model_overrides={})
    with pytest.raises(ConfigError, match=r"init_from: .*model.safetensors is not a read"):
        run_training(tiny_examples, tiny_tokenizer, cfg)


def test_resume_true_refuses_a_dangling_or_missing_last_checkpoint(
    tmp_path, tiny_tokenizer, tiny_examples
):
    run_training(tiny_examples, tiny_tokenizer, tiny_config(tmp_path))
    folder = tmp_path / "ckpt"
    (folder / "step-6.ckpt").unlink()  # last.ckpt now links to nothing
    cfg = tiny_config(tmp_path, resume=True)
    with pytest.raises(
        ConfigError,
        match=rf"^parameter pretrain_model.resume=true: {folder}/last.ckpt points to "
        r"step-6.ckpt, which does not exist, .*set pretrain_model.resume=false to start over",
    ):
        run_training(tiny_examples, tiny_tokenizer, cfg)
    assert [p.name for p in folder.glob("*.ckpt")] == ["last.ckpt"]  # nothing archived or trained

    (folder / "step-6.ckpt").write_bytes(b"PK\x03\x04 torn")
    with pytest.raises(ConfigError, match=rf"{folder}/last.ckpt is not a readable check"):
        run_training(tiny_examples, tiny_tokenizer, cfg)
    (folder / "step-6.ckpt").unlink()
    (folder / "last.ckpt").unlink()
    with pytest.raises(ConfigError, match=rf"{folder}/last.ckpt does not exist, so"):
        run_training(tiny_examples, tiny_tokenizer, cfg)
    assert not list(folder.glob("*.ckpt"))


def test_kedro_run_with_resume_and_no_checkpoint_is_refused_before_the_first_node(
    tmp_path, project_root, mlflow_uri
):
    from tests.pipelines.test_pretrain_model import TINY_RUN

    data_dir = tmp_path / "data"
    runtime = {"data_dir": str(data_dir), **TINY_RUN}
    runtime["pretrain_model"] = {**TINY_RUN["pretrain_model"], "resume": True}
    bootstrap_project(project_root)
    with KedroSession.create(project_path=project_root, runtime_params=runtime) as session:
        with pytest.raises(ValueError, match=r"resume=true: .*pretrain_checkpoints/last.ckpt do"):
            session.run(pipeline_names=["pretrain"])
    assert [p.name for p in data_dir.iterdir()] == [".run.lock"]  # no node ran


class _FullDisk:
    """`folder` on a disk that fills up, with the temporary directory on another filesystem.

    Files written in `folder` take `free` more bytes (unlimited until set), then the write that
    overflows lands in part and raises ENOSPC, as a full disk does (or, with `kill`, the process
    is killed by SIGKILL there, mid-write). A rename into `folder` from
    outside it fails with EXDEV, as across filesystems (shutil.move then copies).
    """

    def __init__(self, folder: Path, monkeypatch: pytest.MonkeyPatch, kill: bool = False) -> None:
        self.folder, self.free, self.kill = str(folder), None, kill
        real_open, real_rename, real_replace = builtins.open, os.rename, os.replace

        def open_(file, mode="r", *args, **kwargs):
            handle = real_open(file, mode, *args, **kwargs)
            if isinstance(file, (str, Path)) and self._inside(file) and set(mode) & set("wax"):
                return _FillingFile(handle, self)
            return handle

        def cross_device(real):
            def rename(src, dst, *args, **kwargs):
                if self._inside(dst) and not self._inside(src):
                    raise OSError(errno.EXDEV, "Invalid cross-device link", str(src))
                return real(src, dst, *args, **kwargs)

            return rename

        monkeypatch.setattr(builtins, "open", open_)
        monkeypatch.setattr(os, "rename", cross_device(real_rename))
        monkeypatch.setattr(os, "replace", cross_device(real_replace))
        # sendfile copies below Python; a plain write() loop meets the full disk the same way
        monkeypatch.setattr(shutil, "_USE_CP_SENDFILE", False)

    def _inside(self, path) -> bool:
        return os.path.abspath(path).startswith(self.folder + os.sep)


class _FillingFile:
    def __init__(self, handle, disk: _FullDisk) -> None:
        self._handle, self._disk = handle, disk

    def write(self, data) -> int:
        data = memoryview(data).cast("B")
        free = self._disk.free
        if free is not None and len(data) > free:
            self._handle.write(data[:free])
            self._disk.free = 0
            if self._disk.kill:
                self._handle.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            raise OSError(errno.ENOSPC, "No space left on device", self._handle.name)
        if free is not None:
            self._disk.free = free - len(data)
        return self._handle.write(data)

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._handle.close()


class _DiskFillsAfterFirstCheckpoint(Callback):
    """From step 4 on, the disk has room for half of the step-3 checkpoint."""

    def __init__(self, disk: _FullDisk) -> None:
        self.disk = disk

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == 4 and self.disk.free is None:
            self.disk.free = (Path(self.disk.folder) / "step-3.ckpt").stat().st_size // 2


def test_a_full_disk_tears_no_checkpoint_and_keeps_the_last_good_one(
    tmp_path, tiny_tokenizer, tiny_examples, monkeypatch
):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    disk = _FullDisk(folder, monkeypatch)
    fills = _DiskFillsAfterFirstCheckpoint(disk)
    with pytest.raises(OSError, match="No space left on device"):
        run_training(tiny_examples, tiny_tokenizer, tiny_config(tmp_path), extra_callbacks=[fills])
    monkeypatch.undo()

    assert disk.free == 0, "the step-6 checkpoint never met the full disk"
    assert sorted(p.name for p in folder.iterdir()) == [".run.lock", "last.ckpt", "step-3.ckpt"]
    assert torch.load(folder / "last.ckpt", weights_only=True)["global_step"] == 3
    resumed = run_training(tiny_examples, tiny_tokenizer, tiny_config(tmp_path, resume=True))
    assert resumed.metrics["global_step"] == 6


def test_a_kill_mid_write_keeps_the_last_checkpoint_and_resume_clears_the_fragment(
    tmp_path, project_root, tiny_tokenizer, tiny_shards
):
    from bert_pipeline.data.tokenizer import save_tokenizer

    save_tokenizer(tiny_tokenizer, tmp_path / "tok")
    folder = tmp_path / "ckpt"
    folder.mkdir()
    script = (
        "import pytest\n"
        "from pathlib import Path\n"
        "from bert_pipeline.data.shards import load_example_shards\n"
        "from bert_pipeline.data.tokenizer import load_tokenizer\n"
        "from bert_pipeline.training.trainer import run_training\n"
        "from tests.training.test_checkpoints import _DiskFillsAfterFirstCheckpoint, _FullDisk\n"
        "from tests.training.test_training import tiny_config\n"
        f"disk = _FullDisk(Path({str(folder)!r}), pytest.MonkeyPatch(), kill=True)\n"
        f"run_training(load_example_shards({str(tiny_shards.paths()[0].parent)!r}),\n"
        f"             load_tokenizer({str(tmp_path / 'tok')!r}),\n"
        f"             tiny_config(Path({str(tmp_path)!r})),\n"
        "             extra_callbacks=[_DiskFillsAfterFirstCheckpoint(disk)])\n"
    )
    killed = subprocess.run([sys.executable, "-c", script], cwd=project_root, check=False)
    assert killed.returncode == -signal.SIGKILL

    assert sorted(p.name for p in folder.glob("*.ckpt")) == ["last.ckpt", "step-3.ckpt"]
    assert torch.load(folder / "last.ckpt", weights_only=True)["global_step"] == 3
    (fragment,) = folder.glob(".step-6.ckpt.*.tmp")
    assert 0 < fragment.stat().st_size < (folder / "step-3.ckpt").stat().st_size
    resumed = run_training(tiny_shards, tiny_tokenizer, tiny_config(tmp_path, resume=True))
    assert resumed.metrics["global_step"] == 6
    assert sorted(p.name for p in folder.iterdir()) == [".run.lock", "last.ckpt", "step-6.ckpt"]


def test_a_sigterm_fails_the_run_and_names_the_checkpoint_that_continues_it(
    tmp_path, tiny_tokenizer, tiny_examples
):
    last = re.escape(str(tmp_path / "ckpt" / "last.ckpt"))
    handler, stop = signal.getsignal(signal.SIGTERM), KillAt(3, signal.SIGTERM)  # stops after 4
    with pytest.raises(StoppedBySignal, match=f"at step 4: .*resume=true continues from {last}"):
        run_training(tiny_examples, tiny_tokenizer, tiny_config(tmp_path), extra_callbacks=[stop])
    assert signal.getsignal(signal.SIGTERM) == handler, "Lightning's handler outlived fit"
    resumed = run_training(tiny_examples, tiny_tokenizer, tiny_config(tmp_path, resume=True))
    assert resumed.metrics["global_step"] == 6

    early = tmp_path / "early"
    with pytest.raises(StoppedBySignal, match=r"at step 2: .*no checkpoint written yet"):
        run_training(
            tiny_examples,
            tiny_tokenizer,
            tiny_config(early),
            extra_callbacks=[KillAt(1, signal.SIGTERM)],
        )


class _SigtermInFinalValidation(Callback):
    def on_validation_batch_end(self, trainer, *args, **kwargs):
        if trainer.state.fn == TrainerFn.VALIDATING:  # `validate` after `fit`, not fit's own
            os.kill(os.getpid(), signal.SIGTERM)


def test_a_sigterm_in_the_final_validation_fails_the_run(tmp_path, tiny_tokenizer, tiny_examples):
    cfg = tiny_config(tmp_path, max_steps=7)  # step 7 is not a validation step: validated after
    with pytest.raises(StoppedBySignal, match="at step 7: .*resume=true continues from"):
        run_training(
            tiny_examples, tiny_tokenizer, cfg, extra_callbacks=[_SigtermInFinalValidation()]
        )
