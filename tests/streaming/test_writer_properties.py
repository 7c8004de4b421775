"""Property: any schema, any samples, any size limit -> the reader returns exactly what was written,
and every shard respects the limit (a lone oversized sample excepted)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foundry.streaming.format import load_index, open_shard
from foundry.streaming.writer import MDSWriter

VALUES = {
    "int": st.integers(-(1 << 63), (1 << 63) - 1),
    "str": st.text(max_size=40),
    "bytes": st.binary(max_size=60),
    "float64": st.floats(allow_nan=False).map(np.float64),
    "uint16": st.integers(0, 65535).map(np.uint16),
    "str_int": st.integers(),
    "json": st.recursive(st.none() | st.integers(-1000, 1000) | st.text(max_size=5),
                         lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
                         max_leaves=6),
    "ndarray": st.lists(st.integers(-100, 100), min_size=1, max_size=20).map(lambda v: np.array(v, np.int32)),
    "ndarray:int16:3": st.lists(st.integers(-100, 100), min_size=3, max_size=3).map(lambda v: np.array(v, np.int16)),
}


@st.composite
def datasets(draw):
    names = draw(st.lists(st.text("abcdefgh", min_size=1, max_size=4), min_size=1, max_size=4, unique=True))
    columns = {n: draw(st.sampled_from(sorted(VALUES))) for n in names}
    rows = draw(st.lists(st.fixed_dictionaries({n: VALUES[e] for n, e in columns.items()}), min_size=1, max_size=40))
    limit = draw(st.one_of(st.none(), st.integers(300, 3000)))
    return columns, rows, limit


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    return type(a) is type(b) and a == b


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(datasets())
def test_what_is_written_is_read_back(dataset):
    columns, rows, limit = dataset
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ds"
        with MDSWriter(out=str(root), columns=columns, size_limit=limit) as w:
            for row in rows:
                w.write(row)
        got = []
        for info in load_index((root / "index.json").read_bytes()):
            if limit is not None and info.samples > 1:
                assert info.raw_bytes <= limit
            with open_shard(info, root / info.raw_basename) as reader:
                got += [reader.get_sample(i) for i in range(len(reader))]
    assert len(got) == len(rows)
    for want, have in zip(rows, got):
        assert set(have) == set(want)
        for key in want:
            assert _same(have[key], want[key]), (key, columns[key], want[key], have[key])
