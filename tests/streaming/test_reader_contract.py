"""The reader contract (format/contract.py): every reader the read path holds declares its abilities,
so callers ask it instead of probing attributes."""

from __future__ import annotations

import numpy as np
import pytest

from foundry.streaming import MDSWriter
from foundry.streaming.format import open_shard
from foundry.streaming.format.contract import EarlyReader, SampleReader
from foundry.streaming.format.framed_reader import FramedMDSReader
from foundry.streaming.format.index import load_index
from foundry.streaming.format.ranged_reader import RangedMDSReader


def _shard(tmp_path, columns, sample, n=4):
    with MDSWriter(out=str(tmp_path), columns=columns) as w:
        for _ in range(n):
            w.write(sample)
    info = load_index(open(tmp_path / "index.json").read())[0]
    return info, tmp_path / info.raw_basename


def test_every_reader_is_a_sample_reader_and_the_early_ones_early_readers():
    assert issubclass(FramedMDSReader, EarlyReader) and issubclass(RangedMDSReader, EarlyReader)
    assert RangedMDSReader.reads_ahead and not FramedMDSReader.reads_ahead
    assert issubclass(EarlyReader, SampleReader)


@pytest.mark.parametrize("mapped", [True, False])
def test_fixed_columns_are_the_readers_own_answer(tmp_path, mapped):
    info, path = _shard(tmp_path, {"x": "ndarray:int32:8", "y": "int64"},
                        {"x": np.arange(8, dtype=np.int32), "y": np.int64(3)})
    reader = open_shard(info, path, mapped=mapped)
    assert isinstance(reader, SampleReader) and reader.settled and not reader.reads_ahead
    columns = reader.fixed_columns()
    if mapped:  # a mapped reader reads no rows: it says so instead of lacking the method
        assert columns is None
        with pytest.raises(NotImplementedError):
            reader.read_rows_into([0], [[memoryview(bytearray(40))]])
    else:
        assert [(c.name, c.nbytes, c.kind) for c in columns] == [("x", 32, "array"), ("y", 8, "numpy")]
        assert reader.fixed_columns() is columns  # found once
        assert "_fixed_columns" not in vars(reader)  # nobody else writes onto the reader
    reader.close()


def test_a_variable_size_column_has_no_fixed_columns(tmp_path):
    info, path = _shard(tmp_path, {"t": "str"}, {"t": "hello"})
    reader = open_shard(info, path, mapped=False)
    assert reader.fixed_columns() is None
    reader.close()
