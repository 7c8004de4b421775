"""Restore downloads a checkpoint once per node into a folder keyed by host (the torchrun case, two
ranks sharing one download, is in test_exactness.py's world-size change)."""

from __future__ import annotations

import pytest

from foundry.plugins.errors import CheckpointError
from foundry.trainer.checkpoint.node_staging import NodeStaging
from foundry.trainer.dist import DistEnv


def test_one_fetch_into_the_hosts_folder_removed_when_done(tmp_path, monkeypatch):
    monkeypatch.setattr("socket.gethostname", lambda: "node-a")
    node = NodeStaging(tmp_path / "_load", DistEnv())
    calls = []

    def fetch(dest):
        calls.append(dest)
        dest.mkdir(parents=True)
        (dest / "state.pt").write_text("x")
        return "found"

    assert node.downloads and node.fetch(fetch) == "found"
    assert calls == [tmp_path / "_load" / "node-a"]
    node.done()
    assert not (tmp_path / "_load" / "node-a").exists()


def test_nodes_sharing_a_file_system_use_their_own_folders(tmp_path, monkeypatch):
    folders = []
    for host in ("node-a", "node-b"):
        monkeypatch.setattr("socket.gethostname", lambda host=host: host)
        folders.append(NodeStaging(tmp_path / "_load", DistEnv()).folder)
    assert folders[0] != folders[1] and folders[0].parent == folders[1].parent


def test_a_failed_download_raises_and_cleans_up(tmp_path):
    node = NodeStaging(tmp_path / "_load", DistEnv())

    def fetch(dest):
        dest.mkdir(parents=True)
        raise CheckpointError("corrupt")

    with pytest.raises(CheckpointError, match="corrupt"):
        node.fetch(fetch)
    node.done(wait_for_all=False)
    assert not node.folder.exists()
