"""The resume contract's edges, in-process: unsafe checkpoints are refused (a crafted pickle never
runs), Composer's argument forms (max_duration in fit(), a forward that returns the loss, load_path
to one file, unknown arguments named), checkpoint_published for every checkpoint, and restore in
resume()/fit(), never in the constructor."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
import torch

from foundry.plugins.errors import CheckpointError, ConfigError
from foundry.plugins.manager import open_store
from foundry.trainer.checkpoint import store_ops
from foundry.trainer.checkpoint.format import MANIFEST, digest_file, pointer_bytes

from .toy_job import ToyLoader, ToyModel


def make(tmp_path, folder, steps=4, run_name="c", model=None, **kw):
    from foundry.trainer import Trainer

    torch.manual_seed(0)
    kw.setdefault("save_interval", "2ba")
    return Trainer(run_name=run_name, model=model or ToyModel(), train_dataloader=ToyLoader(0, 1),
                   max_duration=None if steps is None else f"{steps}ba", save_folder=str(folder),
                   run_dir=str(tmp_path / "run"), device="cpu", progress_bar=False, **kw)


class Evil:
    """Unpickling this runs code: it creates the marker file."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _tamper(folder: Path, name: str, fname: str, payload: bytes) -> None:
    """Replace one file of a checkpoint and re-sign it (manifest + latest), as a bucket owner could."""
    (folder / name / fname).write_bytes(payload)
    store = open_store(str(folder))
    manifest = store_ops.read_manifest(store, name)
    manifest.files = [digest_file(folder / name / f.key, f.key) if f.key == fname else f for f in manifest.files]
    data = manifest.to_bytes()
    (folder / name / MANIFEST).write_bytes(data)
    (folder / "latest").write_bytes(pointer_bytes(name, data))


def _pickled(obj) -> bytes:
    import io

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


@pytest.mark.parametrize("layout,fname", [("full", "extra.pt"), ("full", "state.pt"), ("sharded", ".metadata")])
def test_a_checkpoint_needing_unsafe_unpickling_is_refused(tmp_path, layout, fname):
    folder, marker = tmp_path / "ck", tmp_path / "pwned"
    make(tmp_path, folder, steps=2, checkpoint_layout=layout).fit()
    import pickle

    payload = _pickled({"x": Evil(marker)}) if fname.endswith(".pt") else pickle.dumps(Evil(marker))
    _tamper(folder, "ep0-ba2", fname, payload)
    t = make(tmp_path, folder, steps=4, checkpoint_layout=layout, autoresume=True)
    with pytest.raises(CheckpointError, match="unsafe"):
        t.resume()
    assert not marker.exists()


def test_extra_state_holds_only_safe_types_and_loads_weights_only(tmp_path):
    folder = tmp_path / "ck"
    make(tmp_path, folder, steps=2).fit()
    extra = torch.load(folder / "ep0-ba2" / "extra.pt", weights_only=True)  # would raise on anything else
    assert set(extra) >= {"rng", "epoch_rng", "timestamp", "dataloader", "schedulers", "microbatch_size"}


def test_unsafe_state_from_a_loader_fails_at_save_with_its_path(tmp_path):
    class OddLoader(ToyLoader):
        def state_dict(self):
            return {"epoch": self.epoch, "where": threading.Lock()}

    from foundry.trainer import Trainer

    t = Trainer(run_name="odd", model=ToyModel(), train_dataloader=OddLoader(0, 1), max_duration="2ba",
                save_folder=str(tmp_path / "ck"), save_interval="1ba", run_dir=str(tmp_path / "run"), device="cpu",
                progress_bar=False)
    with pytest.raises(CheckpointError, match=r"dataloader/0/where"):
        t.fit()


def test_max_duration_given_to_fit(tmp_path):
    from foundry.trainer import WarmupCosine

    t = make(tmp_path, tmp_path / "ck", steps=None, schedulers=WarmupCosine("1ba"))
    with pytest.raises(ConfigError, match="max_duration is not set"):
        t.fit()
    t.fit(max_duration="3ba")
    assert t.timestamp.batch == 3 and t.schedulers
    t.fit(max_duration="5ba")  # and again, for longer: it continues
    assert t.timestamp.batch == 5
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "loss" in r] == [1, 2, 3, 4, 5]


def test_forward_that_returns_the_loss(tmp_path):
    class ReturnsLoss(torch.nn.Module):
        def __init__(self, as_dict: bool):
            super().__init__()
            self.lin, self.as_dict = torch.nn.Linear(8, 1), as_dict

        def forward(self, batch):
            loss = torch.nn.functional.mse_loss(self.lin(batch["x"]), batch["y"])
            return {"loss": loss, "logits": None} if self.as_dict else loss

    for as_dict in (False, True):
        t = make(tmp_path, tmp_path / f"ck{as_dict}", steps=2, model=ReturnsLoss(as_dict)).fit()
        assert t.timestamp.batch == 2 and t.last_loss is not None


def test_unknown_and_composer_only_arguments_are_named(tmp_path):
    with pytest.raises(ConfigError) as err:
        make(tmp_path, tmp_path / "ck", algorithms=[], fsdp_config={}, save_intervall="1ba")
    message = str(err.value)
    assert "algorithms, fsdp_config" in message and "save_intervall" in message and "\n" not in message


def test_load_path_to_one_file(tmp_path):
    first = make(tmp_path, tmp_path / "a", steps=2, run_name="a").fit()
    inside = make(tmp_path, tmp_path / "b", run_name="b", load_path=str(tmp_path / "a" / "ep0-ba2" / "state.pt"))
    assert inside.resume() == "ep0-ba2" and inside.timestamp.batch == 2  # a file inside a checkpoint: that one
    weights = {k: v.clone() for k, v in first.raw_model.state_dict().items()}
    torch.save({"state": {"model": weights}, "rng": [1, 2]}, tmp_path / "composer.pt")  # Composer's layout
    torch.save(weights, tmp_path / "bare.pt")
    for fname in ("composer.pt", "bare.pt"):
        t = make(tmp_path, tmp_path / f"c-{fname}", run_name="c", load_path=str(tmp_path / fname))
        assert t.resume() == fname and t.timestamp.batch == 0  # weights only
        for key, value in weights.items():
            assert torch.equal(t.raw_model.state_dict()[key], value)


def test_restore_happens_in_resume_not_the_constructor(tmp_path):
    folder = tmp_path / "ck"
    make(tmp_path, folder, steps=2).fit()
    t = make(tmp_path, folder, steps=4, autoresume=True)
    assert t.timestamp.batch == 0 and t.checkpoints.resumed_from is None
    assert t.resume() == "ep0-ba2" and t.timestamp.batch == 2
    assert t.resume() == "ep0-ba2" and t.timestamp.batch == 2  # once only
    t.fit()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    resumed = [r for r in rows if r.get("event") == "resumed"]
    assert len(resumed) == 1 and resumed[0]["checkpoint"] == "ep0-ba2"
    assert resumed[0]["checkpoint_url"] == f"file://{folder}/ep0-ba2"


class SlowUploads:
    """Wraps a store so every upload takes a while: the next save has to wait for the previous."""

    def __init__(self, inner):
        self.inner, self.url = inner, inner.url

    def put_file(self, key, path, progress=None):
        import time

        time.sleep(0.3)
        self.inner.put_file(key, path)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_checkpoint_published_fires_for_every_checkpoint(tmp_path):
    published = []

    class Seen:
        def checkpoint_published(self, trainer, name):
            published.append(name)

    t = make(tmp_path, tmp_path / "ck", steps=5, save_interval="1ba", callbacks=[Seen()])
    t.checkpoints.saver.store = SlowUploads(t.checkpoints.saver.store)
    t.fit()
    assert published == [f"ep0-ba{i}" for i in range(1, 6)]
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["checkpoint"] for r in rows if r.get("event") == "checkpoint_published"] == published




PLAIN_LOADER_JOB = """
import os, signal, sys, torch
from torch.utils.data import DataLoader, TensorDataset
from foundry.trainer import Trainer

class GroupSignal:
    def batch_end(self, trainer):
        if trainer.timestamp.batch == 2:  # to the group, workers included, as scancel --signal does,
            import threading              # while the loop waits for data from the (slow) workers
            threading.Timer(0.2, os.killpg, (os.getpgrp(), signal.SIGTERM)).start()

def slow(batch):
    import time
    time.sleep(0.5)
    return torch.utils.data.default_collate(batch)

if __name__ == "__main__":
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    # spawn: workers do not inherit the trainer's signal handler, so only an explicit ignore saves them
    loader = DataLoader(data, batch_size=4, num_workers=2, collate_fn=slow, multiprocessing_context="spawn")
    t = Trainer(run_name="plain", model=torch.nn.Linear(8, 1), train_dataloader=loader, max_duration="12ba",
                loss_fn=torch.nn.functional.mse_loss, save_folder=sys.argv[1], save_interval="100ba",
                run_dir=sys.argv[2], device="cpu", progress_bar=False, callbacks=[GroupSignal()])
    t.fit()
"""


@pytest.mark.subprocess
def test_sigterm_to_the_process_group_pauses_with_plain_dataloader_workers(tmp_path):
    import subprocess
    import sys

    from foundry.plugins.compute import PAUSED_EXIT_CODE

    script = tmp_path / "job.py"
    script.write_text(PLAIN_LOADER_JOB)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "ck"), str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=120, start_new_session=True)
    assert proc.returncode == PAUSED_EXIT_CODE, proc.stderr[-3000:]
    assert "killed by signal" not in proc.stderr
    latest = store_ops.read_latest(open_store(str(tmp_path / "ck")))["checkpoint"]  # the pause checkpoint
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["checkpoint"] for r in rows if r.get("event") == "paused"] == [latest]
