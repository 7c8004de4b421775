"""The plugin manager: built-ins first, attribution, duplicates, entry-point switches, open_store."""

from __future__ import annotations

import pytest

from foundry.plugins import manager
from foundry.plugins.errors import ConfigError, PluginError
from foundry.plugins.hookspecs import hookimpl
from foundry.plugins.manager import (
    compute_registry,
    list_plugins,
    open_store,
    register_plugin,
    storage_registry,
    unregister_plugin,
)


class _Store:
    def __init__(self, url):
        self.url = url

    @classmethod
    def from_url(cls, url, options=None):
        return cls(url)


class DuplicateFile:
    @hookimpl
    def register_storage(self, register):
        register("file", _Store)


class NewScheme:
    @hookimpl
    def register_storage(self, register):
        register("memtest", _Store)


def test_builtins_are_registered_first_and_attributed():
    reg = storage_registry().get("file")
    assert reg is not None and reg.plugin == "foundry.backends.storage.plugin"
    names = [p.name for p in list_plugins()]
    assert names[: len(manager.BUILTIN_PLUGINS)] == list(manager.BUILTIN_PLUGINS) or set(
        manager.BUILTIN_PLUGINS
    ) <= set(names)


def test_duplicate_scheme_names_both_plugins():
    register_plugin(DuplicateFile(), name="dup-plugin")
    try:
        with pytest.raises(PluginError) as info:
            storage_registry()
        assert "foundry.backends.storage.plugin" in str(info.value)
        assert "dup-plugin" in str(info.value)
    finally:
        unregister_plugin("dup-plugin")
    assert storage_registry().get("file").plugin == "foundry.backends.storage.plugin"


def test_in_process_plugin_contributes_a_scheme():
    register_plugin(NewScheme(), name="memtest-plugin")
    try:
        store = open_store("memtest://bucket/prefix")
        assert isinstance(store, _Store) and store.url == "memtest://bucket/prefix"
        info = {p.name: p for p in list_plugins()}["memtest-plugin"]
        assert info.hooks == ["register_storage"]
        assert info.contributes == {"storage": ["memtest"]}
    finally:
        unregister_plugin("memtest-plugin")
    with pytest.raises(ConfigError):
        open_store("memtest://bucket")


def test_unknown_scheme_lists_installed_schemes():
    with pytest.raises(ConfigError) as info:
        open_store("nope://bucket/key")
    assert "nope" in info.value.message
    assert "file" in info.value.hint


@pytest.mark.parametrize("url", ["", "   ", "s3://", "file://remotehost/x"])
def test_malformed_urls_are_config_errors(url):
    with pytest.raises(ConfigError):
        open_store(url)


def test_plain_paths_are_file_stores(tmp_path):
    store = open_store(str(tmp_path / "data"))
    store.put("a/b.bin", b"xyz")
    assert store.url == f"file://{tmp_path / 'data'}"
    assert open_store(f"file://{tmp_path}/data").get("a/b.bin") == b"xyz"


def test_entry_point_switches(monkeypatch):
    class EP:
        def __init__(self, name, dist_name):
            self.name, self.value = name, f"{name}:plugin"
            self.dist = type("D", (), {"name": dist_name, "version": "1.0"})()

    eps = [EP("alpha", "foundry-alpha"), EP("beta", "foundry-beta")]
    monkeypatch.setattr(manager.metadata, "entry_points", lambda group: eps)
    monkeypatch.delenv("FOUNDRY_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    assert [e.name for e in manager._entry_points_to_load()] == ["alpha", "beta"]
    monkeypatch.setenv("FOUNDRY_DISABLE_PLUGIN_AUTOLOAD", "1")
    assert manager._entry_points_to_load() == []
    monkeypatch.setenv("FOUNDRY_LOAD_PLUGINS", "foundry-beta")
    assert [e.name for e in manager._entry_points_to_load()] == ["beta"]
    monkeypatch.setenv("FOUNDRY_LOAD_PLUGINS", "")
    assert manager._entry_points_to_load() == []


def test_broken_entry_point_is_a_clear_error(monkeypatch):
    class Broken:
        name, value, dist = "broken", "nowhere_module:plugin", None

        def load(self):
            raise ImportError("No module named 'nowhere_module'")

    monkeypatch.setattr(manager.metadata, "entry_points", lambda group: [Broken()])
    monkeypatch.delenv("FOUNDRY_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    manager.reset_plugin_manager()
    with pytest.raises(PluginError) as info:
        manager.get_plugin_manager()
    assert "broken" in info.value.message and "FOUNDRY_DISABLE_PLUGIN_AUTOLOAD" in info.value.hint


def test_compute_registry_builds():
    assert isinstance(compute_registry().names(), list)
