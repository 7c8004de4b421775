"""Suite-wide fixtures: an isolated FOUNDRY_HOME, no third-party plugin autoload, a fresh plugin manager."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_foundry(tmp_path, monkeypatch):
    monkeypatch.setenv("FOUNDRY_HOME", str(tmp_path / "foundry-home"))
    monkeypatch.setenv("FOUNDRY_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.delenv("FOUNDRY_LOAD_PLUGINS", raising=False)
    from foundry.plugins.manager import reset_plugin_manager

    reset_plugin_manager()
    yield
    reset_plugin_manager()
