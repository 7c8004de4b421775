"""Suite-wide fixtures: an isolated FOUNDRY_HOME, no third-party plugin autoload, a fresh plugin manager."""

from __future__ import annotations

import pytest

# Shared fixtures, one module per kind of real server (see tests/support/).
pytest_plugins = ["support.storage_servers", "support.slurm", "support.peers", "support.oci_stub"]


_LOOPBACK_PREFIXES = ("127.", "::1", "localhost", "0:0:0:0:0:0:0:1")


@pytest.fixture(autouse=True, scope="session")
def _loopback_only():
    """Tests talk to servers on this machine only: refuse in-process connections elsewhere."""
    import socket

    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def check(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            host = str(address[0])
            if not host.startswith(_LOOPBACK_PREFIXES):
                raise ConnectionRefusedError(f"tests may only connect to loopback, not {host}")

    def connect(sock, address):
        check(sock, address)
        return real_connect(sock, address)

    def connect_ex(sock, address):
        check(sock, address)
        return real_connect_ex(sock, address)

    socket.socket.connect, socket.socket.connect_ex = connect, connect_ex
    yield
    socket.socket.connect, socket.socket.connect_ex = real_connect, real_connect_ex


@pytest.fixture(autouse=True)
def _isolated_foundry(tmp_path, monkeypatch):
    monkeypatch.setenv("FOUNDRY_HOME", str(tmp_path / "foundry-home"))
    monkeypatch.setenv("FOUNDRY_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.delenv("FOUNDRY_LOAD_PLUGINS", raising=False)
    from foundry.plugins.manager import reset_plugin_manager

    reset_plugin_manager()
    yield
    reset_plugin_manager()
