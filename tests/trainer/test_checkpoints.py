"""Checkpoint behaviour in-process: fallback on corruption, partial checkpoints never loaded,
pruning, save_overwrite, autoresume keyed by run name, load_path to one checkpoint, sharded layout,
and at most one checkpoint in flight."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from foundry.plugins.errors import CheckpointError
from foundry.plugins.manager import open_store
from foundry.trainer.checkpoint import store_ops
from foundry.trainer.checkpoint.saver import CheckpointSaver

from .toy_job import ToyLoader, ToyModel


def make(tmp_path, folder, steps=6, run_name="ck", **kw):
    from foundry.trainer import Trainer

    torch.manual_seed(0)
    model = ToyModel()
    kw.setdefault("save_interval", "2ba")
    return Trainer(run_name=run_name, model=model, train_dataloader=ToyLoader(0, 1), max_duration=f"{steps}ba",
                   save_folder=str(folder), run_dir=str(tmp_path / "run"), device="cpu", progress_bar=False, **kw)


def params(trainer):
    return {k: v.clone() for k, v in trainer.raw_model.state_dict().items()}


def test_corrupt_latest_falls_back_with_warning(tmp_path):
    folder = tmp_path / "ck"
    make(tmp_path, folder, steps=6).fit()
    assert store_ops.read_latest(open_store(str(folder)))["checkpoint"] == "ep0-ba6"
    state = folder / "ep0-ba6" / "state.pt"
    state.write_bytes(state.read_bytes()[:-10] + b"0123456789")  # same size, wrong bytes
    with pytest.warns(UserWarning, match="falling back"):
        t = make(tmp_path, folder, steps=8, autoresume=True)
        t.resume()
    assert t.checkpoints.resumed_from == "ep0-ba4" and t.timestamp.batch == 4


def test_partial_checkpoint_is_never_loaded(tmp_path):
    folder = tmp_path / "ck"
    make(tmp_path, folder, steps=4).fit()
    partial = folder / "ep0-ba9"  # data files without a manifest: a kill before publishing
    partial.mkdir()
    (partial / "state.pt").write_bytes(b"garbage")
    store = open_store(str(folder))
    assert [e.name for e in store_ops.list_checkpoints(store) if not e.complete] == ["ep0-ba9"]
    t = make(tmp_path, folder, steps=5, autoresume=True)
    t.resume()
    assert t.checkpoints.resumed_from == "ep0-ba4"
    t.fit()
    assert store_ops.read_latest(store)["checkpoint"] == "ep0-ba5"


def test_prune_keeps_n_and_latest(tmp_path):
    folder = tmp_path / "ck"
    make(tmp_path, folder, steps=8, save_interval="1ba", save_num_checkpoints_to_keep=2).fit()
    names = [e.name for e in store_ops.list_checkpoints(open_store(str(folder)))]
    assert names == ["ep0-ba7", "ep0-ba8"]


def test_save_overwrite_and_run_name_keying(tmp_path):
    folder = tmp_path / "ck"
    make(tmp_path, folder, steps=2).fit()
    with pytest.raises(CheckpointError, match="already holds checkpoints"):
        make(tmp_path, folder, steps=2).resume()
    with pytest.raises(CheckpointError, match="run 'ck'"):
        make(tmp_path, folder, steps=2, run_name="other", autoresume=True).resume()
    make(tmp_path, folder, steps=3, save_interval="3ba", save_overwrite=True).fit()
    assert [e.name for e in store_ops.list_checkpoints(open_store(str(folder)))] == ["ep0-ba3"]


def test_save_folder_template_and_load_path_to_one_checkpoint(tmp_path):
    template = str(tmp_path / "{run_name}" / "checkpoints")
    first = make(tmp_path, template, steps=4, run_name="a").fit()
    url = f"file://{tmp_path}/a/checkpoints/ep0-ba2"
    t = make(tmp_path, str(tmp_path / "b"), steps=4, run_name="b", load_path=url)
    t.resume()
    assert t.checkpoints.resumed_from == "ep0-ba2" and t.timestamp.batch == 2
    w = make(tmp_path, str(tmp_path / "c"), steps=4, run_name="c", load_path=f"file://{tmp_path}/a/checkpoints",
             load_weights_only=True)
    w.resume()
    assert w.timestamp.batch == 0
    for key, value in params(first).items():
        assert torch.equal(w.raw_model.state_dict()[key], value)


def test_sharded_layout_roundtrip_in_process(tmp_path):
    folder = tmp_path / "ck"
    ref = make(tmp_path, tmp_path / "ref", steps=6, save_interval="100ba").fit()
    make(tmp_path, folder, steps=3, checkpoint_layout="sharded").fit()
    t = make(tmp_path, folder, steps=6, checkpoint_layout="sharded", autoresume=True)
    t.resume()
    assert t.checkpoints.resumed_from == "ep0-ba3"
    t.fit()
    for key, value in params(ref).items():
        assert torch.equal(t.raw_model.state_dict()[key], value)


class SlowStore:
    """Wraps a store; put_file blocks until released, to observe the one-in-flight rule."""

    def __init__(self, inner):
        self.inner, self.url, self.release = inner, inner.url, threading.Event()

    def put_file(self, key, path, progress=None):
        self.release.wait(30)
        self.inner.put_file(key, path)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_at_most_one_checkpoint_in_flight(tmp_path):
    store = SlowStore(open_store(str(tmp_path / "ck")))
    saver = CheckpointSaver(store, "r", "full", 0, 1, -1, tmp_path / "staging", keep_staging=False)
    meta = lambda b: {"timestamp": {"epoch": 0, "batch": b}, "resumption_index": 0, "config": {}}  # noqa: E731
    collect = lambda: ({"w": torch.ones(3)}, {"x": 1}, {})  # noqa: E731
    saver.save({"epoch": 0, "batch": 1}, collect, meta(1))
    assert saver.in_flight == "ep0-ba1" and store_ops.read_latest(store.inner) is None  # returned before the upload
    second_done = threading.Event()
    threading.Thread(target=lambda: (saver.save({"epoch": 0, "batch": 2}, collect, meta(2)),
                                     second_done.set())).start()
    time.sleep(0.3)
    assert not second_done.is_set()  # waiting for the first one to be published
    store.release.set()
    assert second_done.wait(30)
    saver.wait()
    assert store_ops.read_latest(store.inner)["checkpoint"] == "ep0-ba2"


def test_stop_ends_training_with_a_final_checkpoint(tmp_path):
    class StopAt3:
        def batch_end(self, trainer):
            if trainer.timestamp.batch == 3:
                trainer.stop()

    t = make(tmp_path, tmp_path / "ck", steps=10, save_interval="100ba", callbacks=[StopAt3()]).fit()
    assert t.timestamp.batch == 3 and not t.paused
    assert store_ops.read_latest(open_store(str(tmp_path / "ck")))["checkpoint"] == "ep0-ba3"


def test_full_layout_rank_above_zero_stages_nothing_and_does_not_fail(tmp_path):
    saver = CheckpointSaver(open_store(str(tmp_path / "ck")), "r", "full", rank=1, world_size=2, keep=2,
                            staging_root=tmp_path / "never-created", keep_staging=True)
    saver.save({"epoch": 0, "batch": 1}, lambda: ({}, {"x": 1}, {}),
               {"timestamp": {}, "resumption_index": 0, "config": {}})
    assert saver.wait() == []  # rank 1 publishes nothing, and raises nothing
    assert not (tmp_path / "never-created").exists()
