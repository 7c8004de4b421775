"""A temp folder too long for a unix socket path used to hang a DataLoader with workers forever
(the worker's sending thread dies on bind); it is now one line saying what to do."""

from __future__ import annotations

import multiprocessing.process
import tempfile

import numpy as np
import pytest

from foundry.plugins.errors import ConfigError
from foundry.streaming import MDSWriter, StreamingDataLoader, StreamingDataset
from foundry.streaming.loader.worker import check_socket_dir


def test_too_long_temp_folder_is_one_line_not_a_hang(tmp_path, monkeypatch):
    out = tmp_path / "ds"
    with MDSWriter(out=str(out), columns={"x": "ndarray:int32:4"}) as w:
        for i in range(8):
            w.write({"x": np.full(4, i, dtype=np.int32)})
    loader = StreamingDataLoader(StreamingDataset(local=str(out), batch_size=4), batch_size=4, num_workers=2)
    long_dir = tmp_path / ("d" * 100)
    long_dir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(long_dir))
    monkeypatch.delitem(multiprocessing.process.current_process()._config, "tempdir", raising=False)
    with pytest.raises(ConfigError, match="too long for the unix sockets") as err:
        iter(loader)
    assert "TMPDIR" in err.value.hint
    monkeypatch.undo()
    check_socket_dir()   # the test run's own temp folder is fine
