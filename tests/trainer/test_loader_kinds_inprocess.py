"""The headline of issue 29 in one process, for the fast tier: `Trainer(train_dataloader=
torch.utils.data.DataLoader(StreamingDataset(...), batch_size=...), autoresume=True)` stopped by
max_duration and resumed by a new Trainer trains the next batches, not the epoch's first ones again
(the dataset cannot know how many samples training consumed: the trainer says so from its
timestamp). The fresh-process, worker, SIGTERM, kill -9 and world-size cases are in
test_loader_kinds.py."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader

from foundry.streaming import StreamingDataset
from foundry.trainer import Trainer

from . import matrix_job


def _train(tmp_path, data: str, phase: str, duration: str, save: str | None, drop_last: bool):
    torch.manual_seed(0)
    model = matrix_job.Model(dropout=0.0)
    recorder = matrix_job.Recorder(None)
    ds = StreamingDataset(remote=data, local=str(tmp_path / f"cache-{phase}"), shuffle=True, shuffle_seed=7)
    trainer = Trainer(run_name="inproc", model=model, max_duration=duration, device="cpu", progress_bar=False,
                      train_dataloader=DataLoader(ds, batch_size=4, drop_last=drop_last),
                      save_folder=save, autoresume=save is not None, run_dir=str(tmp_path / f"run-{phase}"),
                      save_interval="1000ba", callbacks=[recorder])
    trainer.fit()
    return recorder.seen, model


@pytest.mark.parametrize("samples,drop_last,stops", [
    (22, True, ["5ba", "8ba"]),          # 5 full batches of 4 and one of 2, dropped
    (22, True, ["1ep", "8ba"]),          # after the epoch ended
    (20, False, ["5ba", "1ep", "8ba"]),  # after its last batch, before it ended; then at its end
], ids=["mid", "epoch-end", "last-batch-then-end"])
def test_torch_dataloader_over_streaming_dataset_resumes_at_the_next_batch(tmp_path, samples, drop_last, stops):
    data = str(tmp_path / "data")
    matrix_job.write_dataset(data, samples)
    seen, straight = _train(tmp_path, data, "straight", stops[-1], None, drop_last)
    save = str(tmp_path / "checkpoints")
    parts = [_train(tmp_path, data, f"part{i}", stop, save, drop_last) for i, stop in enumerate(stops)]
    assert [len(part[0]) for part in parts[:2]] == [5, 0 if stops[1] == "1ep" else 3]
    assert sum((part[0] for part in parts), []) == seen
    for key, value in straight.state_dict().items():
        assert torch.equal(parts[-1][1].state_dict()[key], value)
