"""A user's collate_fn or batch_transform on StreamingDataLoader: the batches are torch's own
DataLoader's with the same functions, whether the samples are read as rows and the batch crosses
through the workers' ring (streaming/loader/handover.py) or not."""

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, default_collate

from foundry.streaming import MDSWriter, StreamingDataLoader, StreamingDataset
from foundry.streaming.loader import ring as batch_ring

FIXED = {"tokens": "ndarray:int32:16", "id": "int", "u": "uint8"}
MIXED = {**FIXED, "text": "str", "v": "ndarray:int64"}


def _write(out, columns, n):
    rng = np.random.default_rng(1)
    with MDSWriter(out=str(out), columns=columns, size_limit=2048) as writer:
        for i in range(n):
            writer.write({"tokens": rng.integers(0, 1 << 20, 16, dtype=np.int32), "id": i, "u": np.uint8(i % 200),
                          "text": "t" * (i % 7), "v": np.arange(1 + i % 5, dtype=np.int64)})
    return str(out)


def pad_collate(samples):
    """A fine-tuning collate: padded int64 ids, a mask, labels ignoring the padding, plus extras
    that must cross unchanged (a view sharing the ids' storage, a list of ints, a tuple)."""
    width = max(len(s["tokens"]) for s in samples) + 3
    ids = torch.zeros((len(samples), width), dtype=torch.int64)
    mask = torch.zeros((len(samples), width), dtype=torch.bool)
    for row, s in enumerate(samples):
        ids[row, :len(s["tokens"])] = torch.from_numpy(np.array(s["tokens"]))
        mask[row, :len(s["tokens"])] = True
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(~mask, -100),
            "first": ids[:, 0], "id": [s["id"] for s in samples], "pair": (torch.tensor(len(samples)), "x"),
            "u": torch.tensor([int(s["u"]) for s in samples], dtype=torch.uint8)}


def describe(samples):
    """What a collate_fn is given: each value's type, dtype, shape and whether it is an array."""
    return [[(key, type(v).__name__, str(getattr(v, "dtype", "")), getattr(v, "shape", None)) for key, v in s.items()]
            for s in samples]


def shift_labels(batch):
    """A batch_transform: the stacked tokens as ids and next-token labels."""
    tokens = batch["tokens"].to(torch.int64)
    return {"input_ids": tokens[:, :-1].clone(), "labels": tokens[:, 1:].clone(), "id": batch["id"]}


class _Then:
    """What batch_transform means, for torch's own DataLoader: the collate, then the transform."""

    def __init__(self, collate, transform):
        self.collate, self.transform = collate, transform

    def __call__(self, samples):
        return self.transform(self.collate(samples))


def _same(a, b):
    assert type(a) is type(b)
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for key in a:
            _same(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        assert a == b


def _torch_batches(src, batch, collate_fn, **kw):
    ds = StreamingDataset(local=src, shuffle=True, batch_size=batch)
    batches = iter(DataLoader(ds, batch_size=batch, num_workers=2, collate_fn=collate_fn,
                              multiprocessing_context="fork", **kw))
    made = list(batches)
    batch_ring.forget_rings([w.pid for w in batches._workers])
    return made


def _compare_while_iterating(make_loader, want):
    """Each batch checked as it comes and then dropped (its ring slot is reused), then, from a new
    loader, the epoch kept whole (slots run out: later batches go the usual way)."""
    n = 0
    for got in make_loader():
        _same(got, want[n])
        n += 1
    assert n == len(want)
    kept = list(make_loader())
    assert len(kept) == len(want)
    for got, w in zip(kept, want):
        _same(got, w)


@pytest.mark.subprocess
@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")  # torch's own collate on mapped samples
@pytest.mark.parametrize("columns", [FIXED, MIXED], ids=["fixed-rows", "decoded"])
def test_a_user_collate_makes_torchs_batches(tmp_path, columns):
    src = _write(tmp_path / "data", columns, 150)
    # the collate's tensors crossed through the worker's ring (the first batch maps its segment)
    loader = StreamingDataLoader(StreamingDataset(local=src, shuffle=True, batch_size=8), batch_size=8, num_workers=2,
                                 collate_fn=pad_collate, multiprocessing_context="fork")
    rings = set(batch_ring._RINGS)
    batches = iter(loader)
    first = next(batches)
    assert set(batch_ring._RINGS) - rings and isinstance(first["input_ids"], torch.Tensor)
    del first, batches, loader
    for collate_fn in (pad_collate, describe):
        want = _torch_batches(src, 8, collate_fn, drop_last=False)
        _compare_while_iterating(lambda: StreamingDataLoader(
            StreamingDataset(local=src, shuffle=True, batch_size=8), batch_size=8, num_workers=2,
            collate_fn=collate_fn, multiprocessing_context="fork"), want)


@pytest.mark.subprocess
@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")
def test_batch_transform_gets_the_collated_batch_and_makes_torchs_batches(tmp_path):
    src = _write(tmp_path / "data", FIXED, 150)
    text = _write(tmp_path / "text", {**FIXED, "text": "str"}, 60)  # decoded samples, then the default collate
    for data, drop_last in ((src, False), (src, True), (text, False)):
        want = _torch_batches(data, 7, _Then(default_collate, shift_labels), drop_last=drop_last)

        def loader():
            made = StreamingDataLoader(StreamingDataset(local=data, shuffle=True, batch_size=7), batch_size=7,
                                       num_workers=2, batch_transform=shift_labels, drop_last=drop_last,
                                       multiprocessing_context="fork")
            assert (made.batch_size, made.drop_last) == (7, drop_last)
            return made

        _compare_while_iterating(loader, want)
    # with a collate_fn too: the transform gets what the collate made
    want = _torch_batches(src, 8, _Then(pad_collate, lambda b: {**b, "n": len(b["id"])}))
    _compare_while_iterating(lambda: StreamingDataLoader(
        StreamingDataset(local=src, shuffle=True, batch_size=8), batch_size=8, num_workers=2, collate_fn=pad_collate,
        batch_transform=lambda b: {**b, "n": len(b["id"])}, multiprocessing_context="fork"), want)


@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")
def test_batch_transform_without_workers(tmp_path):
    src = _write(tmp_path / "data", {**FIXED, "text": "str"}, 40)
    ds = StreamingDataset(local=src, shuffle=True, batch_size=8)
    want = list(DataLoader(ds, batch_size=8, collate_fn=_Then(default_collate, shift_labels)))
    got = list(StreamingDataLoader(StreamingDataset(local=src, shuffle=True, batch_size=8), batch_size=8,
                                   batch_transform=shift_labels))
    assert len(got) == len(want) == 5
    for a, b in zip(got, want):
        _same(a, b)


def test_batch_transform_must_be_a_function_of_batches(tmp_path):
    src = _write(tmp_path / "data", FIXED, 8)
    ds = StreamingDataset(local=src, batch_size=4)
    with pytest.raises(ValueError, match="batch_transform"):
        StreamingDataLoader(ds, batch_size=4, batch_transform="pad")
    with pytest.raises(ValueError, match="batch_size"):
        StreamingDataLoader(ds, batch_size=None, batch_transform=shift_labels)
