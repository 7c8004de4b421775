"""DESIGN.md's layer graph, enforced: import-linter contracts (pyproject) plus import-time checks.

The subprocess checks catch what static analysis cannot: an import that drags in a heavy SDK or a
UI toolkit at import time.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY_SDKS = ["boto3", "botocore", "google.cloud.storage", "oci", "kubernetes"]
UI = ["typer", "textual"]


def test_import_linter_contracts_hold():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint, "import-linter is part of the [test] extra"
    result = subprocess.run([lint, "--config", str(ROOT / "pyproject.toml")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def _modules_after_import(module: str) -> set[str]:
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out))


@pytest.mark.parametrize(
    "module",
    ["foundry.plugins.manager", "foundry.streaming", "foundry.trainer", "foundry.backends.storage.plugin"],
)
@pytest.mark.subprocess
def test_layer_imports_no_heavy_sdk_or_ui(module):
    loaded = _modules_after_import(module)
    assert not [m for m in HEAVY_SDKS + UI if m in loaded], f"{module} imports {sorted(set(HEAVY_SDKS + UI) & loaded)}"


@pytest.mark.subprocess
def test_opening_a_file_store_imports_no_cloud_sdk():
    code = (
        "import json, sys, tempfile; from foundry.plugins.manager import open_store;"
        "open_store(tempfile.mkdtemp()).put('k', b'v'); print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = set(json.loads(out))
    assert not [m for m in HEAVY_SDKS if m in loaded]


# ControlPlane's services: how the plane is built, not a second API for the faces (plane.py's docstring)
SERVICES = {"runs", "launcher", "clusters", "secrets", "datasets", "checkpoints", "registry"}


def _plane_expr(node: ast.expr) -> bool:
    """`cp`, `plane`, `self.app.plane`, `_cp(...)`, `ControlPlane(...)`: an expression that is the plane."""
    if isinstance(node, ast.Call):
        node = node.func
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return name in {"cp", "plane", "_cp", "_plane", "ControlPlane"}


def test_cli_tui_and_sdk_call_only_the_control_plane_facade():
    """One door: the faces call ControlPlane's methods, never its services (`cp.runs.move(...)`)."""
    files = [*(ROOT / "app" / "cli").rglob("*.py"), *(ROOT / "app" / "tui").rglob("*.py"), ROOT / "app" / "sdk.py"]
    reaches = [f"{path.relative_to(ROOT)}:{node.lineno}: .{node.attr}"
               for path in files for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.Attribute) and node.attr in SERVICES and _plane_expr(node.value)]
    assert not reaches, "call a ControlPlane method instead:\n" + "\n".join(reaches)


@pytest.mark.parametrize("module", ["foundry.app.cli.main", "foundry.app.tui.app", "foundry.app.tui.main",
                                    "foundry.app.cli.dataset_cmds", "foundry.app.cli.checkpoint_cmds"])
@pytest.mark.subprocess
def test_cli_and_tui_import_no_torch(module):
    """Start-up of `foundry` and `foundry-tui` stays fast: torch is imported only by jobs."""
    code = ("import json, sys, importlib; importlib.import_module(sys.argv[1]); "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'torch')))")
    proc = subprocess.run([sys.executable, "-c", code, module], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []
