"""A real third-party distribution (tests/plugins/sample_plugin) installed for the test, end to end:
discovered through the `foundry` entry point, used through its URL scheme, listed by `foundry plugins`,
governed by FOUNDRY_LOAD_PLUGINS / FOUNDRY_DISABLE_PLUGIN_AUTOLOAD, and a clashing scheme is an error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess  # installs the sample plugin and runs the CLI as a process

SAMPLE = Path(__file__).parent / "sample_plugin"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    target = tmp_path_factory.mktemp("site")
    build = tmp_path_factory.mktemp("build")
    source = build / "src"  # build from a copy: setuptools writes build/ and *.egg-info beside the sources
    shutil.copytree(SAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-cache-dir",
         "--target", str(target), str(source)],
        check=True, capture_output=True, env={**os.environ, "TMPDIR": str(build)}, cwd=build, timeout=180,
    )
    return target


@pytest.fixture
def run(installed, tmp_path):
    def foundry(*args: str, **env: str) -> subprocess.CompletedProcess:
        environ = {k: v for k, v in os.environ.items()
                   if k not in ("FOUNDRY_DISABLE_PLUGIN_AUTOLOAD", "FOUNDRY_LOAD_PLUGINS")}
        environ.update(PYTHONPATH=str(installed), FOUNDRY_SAMPLE_MEMFS_ROOT=str(tmp_path / "memfs"), **env)
        code = "import sys; from foundry.app.cli.main import main; main(sys.argv[1:])"
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                              env=environ, timeout=120)

    return foundry


def _plugins(run, **env) -> dict[str, dict]:
    result = run("plugins", "--json", **env)
    assert result.returncode == 0, result.stderr
    return {p["name"]: p for p in json.loads(result.stdout)}


def test_discovered_and_listed_with_version_and_hooks(run):
    plugins = _plugins(run)
    sample = plugins["sample"]
    assert sample["version"] == "0.3.1" and not sample["builtin"]
    assert sample["hooks"] == ["register_commands", "register_storage"]
    assert sample["contributes"] == {"storage": ["memfs"]}
    assert list(plugins)[0].startswith("foundry.")  # built-ins first


def test_scheme_used_through_urls_and_command(run, tmp_path):
    (tmp_path / "hello.txt").write_text("hi there")
    assert run("cp", str(tmp_path / "hello.txt"), "memfs://bucket/dir/hello.txt").returncode == 0
    assert (tmp_path / "memfs" / "bucket" / "dir" / "hello.txt").read_text() == "hi there"
    listed = run("ls", "--json", "-r", "memfs://bucket")
    assert [(r["key"], r["size"]) for r in json.loads(listed.stdout)] == [("dir/hello.txt", 8)]
    assert run("cp", "memfs://bucket/dir/hello.txt", str(tmp_path / "back.txt")).returncode == 0
    assert (tmp_path / "back.txt").read_text() == "hi there"
    hello = run("sample-hello", "--name", "tests")
    assert hello.returncode == 0 and hello.stdout.strip() == "hello tests from foundry-sample-plugin"


def test_autoload_switches(run):
    assert "sample" not in _plugins(run, FOUNDRY_DISABLE_PLUGIN_AUTOLOAD="1")
    refused = run("ls", "memfs://bucket", FOUNDRY_DISABLE_PLUGIN_AUTOLOAD="1")
    assert refused.returncode == 2 and "unknown storage scheme 'memfs'" in refused.stderr
    assert "sample" not in _plugins(run, FOUNDRY_LOAD_PLUGINS="")
    assert "sample" not in _plugins(run, FOUNDRY_LOAD_PLUGINS="someone-else")
    assert "sample" in _plugins(run, FOUNDRY_LOAD_PLUGINS="sample")
    assert "sample" in _plugins(run, FOUNDRY_LOAD_PLUGINS="foundry-sample-plugin")  # distribution name
    # the allowlist wins over the autoload switch
    assert "sample" in _plugins(run, FOUNDRY_LOAD_PLUGINS="sample", FOUNDRY_DISABLE_PLUGIN_AUTOLOAD="1")


def test_duplicate_scheme_names_both_plugins(run):
    result = run("ls", "s3://bucket", FOUNDRY_SAMPLE_DUPLICATE="s3")
    assert result.returncode == 2
    first = result.stderr.strip().splitlines()[0]
    assert "'s3'" in first and "foundry.backends.storage.plugin" in first and "'sample'" in first
    assert "Traceback" not in result.stderr
