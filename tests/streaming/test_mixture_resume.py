"""Mixtures stay exact across world sizes: streams weighted by proportion (with epoch_size), by
repeat and by choose, stopped mid-epoch past epoch 1 and resumed on another number of nodes, ranks
and DataLoader workers, give the uninterrupted run's global batches, and the epoch after too
(mosaicml-streaming #869 breaks here). Ranks are emulated in this process through the launch
environment, one after another (as test_resume.py does); test_mixture_ranks.py runs real ones."""

from __future__ import annotations

import numpy as np
import pytest
from torch.utils.data import DataLoader

from foundry.streaming import Stream, StreamingDataLoader, StreamingDataset
from foundry.streaming.plan import OrderConfig, WorldShape, epoch_work, interleave_ranks, make_layout, rank_ids, \
    stream_choose
from foundry.streaming.writer import MDSWriter

GLOBAL = 12  # global batch: per-device batch = GLOBAL / ranks

MIXTURES = {  # stream a's weights, stream b's, the dataset's own
    "proportion": ({"proportion": 0.7}, {"proportion": 0.3}, {"epoch_size": 150}),
    "repeat-choose": ({"repeat": 1.5}, {"choose": 35}, {}),
    "down-up": ({"repeat": 0.4}, {"repeat": 2.25}, {}),
}


def write_ids(out, n, first, per_shard):
    with MDSWriter(out=str(out), columns={"id": "int"}, size_limit=per_shard * 30) as w:
        for i in range(first, first + n):
            w.write({"id": i})
    return str(out)


def mixture_maker(root, name, **kw):
    """`make(batch)` for mixture `name` over two streams: a's ids 0..89, b's 1000..1046."""
    a, b = write_ids(root / "a", 90, 0, 8), write_ids(root / "b", 47, 1000, 6)
    wa, wb, extra = MIXTURES[name]

    def make(batch):
        streams = [Stream(remote=a, local=str(root / "cache-a"), **wa), Stream(local=b, **wb)]
        return StreamingDataset(streams=streams, shuffle=True, shuffle_block_size=40, batch_size=batch, **extra, **kw)

    return make


def run_ranks(make, monkeypatch, nodes, per_node, workers, stops, state=None, torch_loader=False):
    """Ranks emulated one after another: each reads len(stops) epochs through a StreamingDataLoader
    (epoch k stops after stops[k] batches, None = whole, "last" = right after its last batch,
    before the loader sees the epoch end). Returns the global sequence of each
    epoch and the state saved at the end (the same on every rank). `torch_loader`: torch's
    DataLoader instead, the state from `dataset.state_dict(global samples in the epoch)` as
    Composer saves it."""
    world = nodes * per_node
    per_rank, states = [], []
    for rank in range(world):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", str(world))
        monkeypatch.setenv("LOCAL_RANK", str(rank % per_node))
        monkeypatch.setenv("LOCAL_WORLD_SIZE", str(per_node))
        ds = make(GLOBAL // world)
        if torch_loader:
            if state is not None:
                ds.load_state_dict(state)
            loader = DataLoader(ds, batch_size=GLOBAL // world, num_workers=workers)
        else:
            loader = StreamingDataLoader(ds, batch_size=GLOBAL // world, num_workers=workers)
            if state is not None:
                loader.load_state_dict(state)
        epochs = []
        read = 0
        for stop in stops:
            if stop == "last":
                stop = -(-len(loader.dataset) // loader.batch_size)
            ids = []
            for i, b in enumerate(loader):
                ids.append(b["id"].numpy())
                if stop is not None and i + 1 == stop:
                    break
            epochs.append(np.concatenate(ids))
            read = len(ids)
        per_rank.append(epochs)
        states.append(ds.state_dict(read * GLOBAL) if torch_loader else loader.state_dict())
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(var)
    assert all(s == states[0] for s in states), "every rank saves the same state"
    return [interleave_ranks([r[e] for r in per_rank], nodes, per_node) for e in range(len(stops))], states[0]


@pytest.mark.subprocess  # DataLoader worker processes, ~15 s a case
@pytest.mark.parametrize("name", list(MIXTURES))
@pytest.mark.parametrize("before,after", [((2, 2, 2), (1, 3, 0)), ((1, 4, 0), (2, 1, 2)), ((1, 1, 2), (1, 6, 1))],
                         ids=["2x2w2-to-1x3", "1x4-to-2x1w2", "1x1w2-to-1x6w1"])
def test_mixture_resumes_on_another_world_with_the_same_global_batches(tmp_path, monkeypatch, name, before, after):
    make = mixture_maker(tmp_path, name)
    n = make(GLOBAL)._layout.epoch_samples  # several ranks repeat a few after them
    straight, _ = run_ranks(make, monkeypatch, *before, [None, None, None, None])  # the same run, uninterrupted
    straight = [e[:n] for e in straight]
    assert not np.array_equal(straight[1], straight[2])
    assert {int(i) >= 1000 for i in straight[1]} == {False, True}  # both streams
    head, state = run_ranks(make, monkeypatch, *before, [None, 5])
    assert (state["epoch"], state["sample_in_epoch"]) == (1, 5 * GLOBAL)
    tail, _ = run_ranks(make, monkeypatch, *after, [None, None], state=state)
    assert np.array_equal(head[0][:n], straight[0])
    assert np.array_equal(np.concatenate([head[1], tail[0]])[:n], straight[1])
    assert np.array_equal(tail[1][:n], straight[2])
    # stopped right after epoch 1's last batch: the resumption starts epoch 2
    head, state = run_ranks(make, monkeypatch, *before, [None, "last"])
    assert (state["epoch"], state["sample_in_epoch"]) == (2, 0)
    assert np.array_equal(head[1][:n], straight[1])
    tail, _ = run_ranks(make, monkeypatch, *after, [None, None], state=state)
    assert np.array_equal(tail[0][:n], straight[2]) and np.array_equal(tail[1][:n], straight[3])


@pytest.mark.subprocess  # DataLoader worker processes
@pytest.mark.parametrize("name", ["repeat-choose"])
def test_mixture_through_torch_dataloader_resumes_on_another_world(tmp_path, monkeypatch, name):
    """The same with torch's own DataLoader and Composer's way of saving (global samples in the
    epoch): stopped in epoch 1 on 2 nodes x 2 ranks with 2 workers, resumed on 3 ranks."""
    make = mixture_maker(tmp_path, name)
    n = make(GLOBAL)._layout.epoch_samples
    straight, _ = run_ranks(make, monkeypatch, 2, 2, 2, [None, None, None], torch_loader=True)
    head, state = run_ranks(make, monkeypatch, 2, 2, 2, [None, 5], torch_loader=True)
    assert (state["epoch"], state["sample_in_epoch"]) == (1, 5 * GLOBAL)
    tail, _ = run_ranks(make, monkeypatch, 1, 3, 0, [None, None], state=state, torch_loader=True)
    assert np.array_equal(np.concatenate([head[1], tail[0]])[:n], straight[1][:n])
    assert np.array_equal(tail[1][:n], straight[2][:n])


def _plan_sequence(layout, cfg, world, epoch, start):
    work = epoch_work(layout, cfg, world, epoch, start)
    per_rank = [rank_ids(work, node, r) for node in range(world.num_nodes) for r in range(world.ranks_per_node)]
    return interleave_ranks(per_rank, world.num_nodes, world.ranks_per_node)


@pytest.mark.parametrize("name", list(MIXTURES))
def test_mixture_plan_is_the_same_global_sequence_from_any_resume_point_and_world(name):
    """The plan behind the test above, for many more points: every epoch's global sequence from
    any whole global batch on is the straight one's rest, on any nodes x ranks x workers."""
    wa, wb, extra = MIXTURES[name]
    sizes = [[8] * 11 + [2], [6] * 7 + [5]]  # 90 and 47 samples, as the datasets above
    choose = stream_choose([90, 47], [wa.get("proportion"), wb.get("proportion")], [wa.get("repeat"), wb.get("repeat")],
                           [wa.get("choose"), wb.get("choose")], extra.get("epoch_size"), 9176)
    layout = make_layout(sizes, choose.tolist())
    n = layout.epoch_samples
    for epoch in (0, 1, 2):
        cfg = OrderConfig(shuffle=True, block_size=40, num_canonical_nodes=2, batch_size=GLOBAL)
        straight = _plan_sequence(layout, cfg, WorldShape(), epoch, 0)
        total = len(straight)  # n, or n + 1 when the 2 canonical nodes split an odd n (one repeat, as mosaic)
        assert total - n == n % 2
        for nodes, per_node, workers in ((1, 3, 2), (2, 2, 1), (2, 3, 3), (1, 12, 1), (4, 1, 2)):
            world = WorldShape(nodes, per_node, workers)
            cfg = OrderConfig(shuffle=True, block_size=40, num_canonical_nodes=2, batch_size=GLOBAL // world.num_ranks)
            for start in range(0, total, 3 * GLOBAL):
                rest = _plan_sequence(layout, cfg, world, epoch, start)
                assert np.array_equal(rest[:total - start], straight[start:]), (epoch, world, start)
                assert len(rest) - (total - start) < world.num_ranks  # a few repeats at most, as mosaic
