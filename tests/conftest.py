"""Suite-wide fixtures: an isolated FOUNDRY_HOME, no third-party plugin autoload, a fresh plugin manager."""

from __future__ import annotations

import pytest

# Shared fixtures, one module per kind of real server (see tests/support/).
pytest_plugins = ["support.storage_servers", "support.slurm", "support.peers"]


@pytest.fixture(autouse=True)
def _isolated_foundry(tmp_path, monkeypatch):
    monkeypatch.setenv("FOUNDRY_HOME", str(tmp_path / "foundry-home"))
    monkeypatch.setenv("FOUNDRY_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.delenv("FOUNDRY_LOAD_PLUGINS", raising=False)
    from foundry.plugins.manager import reset_plugin_manager

    reset_plugin_manager()
    yield
    reset_plugin_manager()
