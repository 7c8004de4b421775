"""Peer libraries in their own virtual environments, for interop tests.

`mosaic_peer` (session): a venv with mosaicml-streaming 0.13.0, created once and cached under
$FOUNDRY_PEERS_DIR or <repo>/.venv-peers/, keyed by a version string (bump it to rebuild). Torch is
pinned to 2.13.0 so the local CPU wheel is reused; torchvision is an import-only stub installed with
--no-deps, because mosaicml-streaming imports it at import time and the registry's build cannot load
next to CPU torch 2.13.0 (the interop path never uses it). The fixture returns a runner:
`mosaic_peer(script, *args)` runs `script` with that venv's Python (isolated mode, so the repo's own
`streaming/` folder never shadows the peer) and returns stdout; a failure raises with its output.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

MOSAIC_KEY = "mosaic-streaming0.13.0-torch2.13.0-v1"
_REPO = Path(__file__).resolve().parents[2]

_STUB_FILES = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "torchvision"
        version = "0.28.0+foundrystub"
        description = "Import-only stand-in for torchvision (interop tests never use it)."

        [tool.setuptools]
        packages = ["torchvision", "torchvision.datasets", "torchvision.transforms"]
        """,
    "torchvision/__init__.py": """
        __version__ = "0.28.0+foundrystub"
        from . import datasets, transforms  # noqa: F401
        """,
    "torchvision/datasets/__init__.py": """
        from torch.utils.data import Dataset


        class VisionDataset(Dataset):
            def __init__(self, root=None, transforms=None, transform=None, target_transform=None):
                self.root, self.transforms = root, transforms
                self.transform, self.target_transform = transform, target_transform


        class CIFAR10(VisionDataset):
            def __init__(self, *args, **kwargs):
                raise NotImplementedError("torchvision stub")
        """,
    "torchvision/transforms/__init__.py": """
        from . import functional  # noqa: F401
        """,
    "torchvision/transforms/functional.py": """
        def to_tensor(pic):
            raise NotImplementedError("torchvision stub")
        """,
}


def peers_dir() -> Path:
    return Path(os.environ.get("FOUNDRY_PEERS_DIR") or _REPO / ".venv-peers")


def _say(progress: bool, message: str) -> None:
    if progress:
        print(f"[setup] {message}", file=sys.stderr, flush=True)


def _uv() -> str | None:
    """uv next to this Python (scripts/setup.sh installs it there) or on PATH; None: use pip."""
    if os.environ.get("USE_UV", "1") != "1":
        return None
    beside = Path(sys.executable).parent / "uv"
    return str(beside) if beside.exists() else shutil.which("uv")


def _torch_wheel_dirs() -> list[str]:
    """Folders of wheels named by pip's configuration that hold the torch 2.13.0 file: uv may take
    torch from there (from an index, the same version is the multi-GB CUDA build)."""
    proc = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.find-links"],
                          capture_output=True, text=True)
    dirs = (proc.stdout if proc.returncode == 0 else os.environ.get("PIP_FIND_LINKS", "")).split()
    return [d for d in dirs if list(Path(d).glob("torch-2.13.0*.whl"))]


def _pip(python: Path, *args: str, progress: bool = False, what: str = "", uv: bool = True) -> None:
    """Install into the venv of `python`; torch goes through pip (pip's config may name a local wheel)."""
    uv_bin = _uv() if uv else None
    if uv_bin:
        cmd = [uv_bin, "pip", "install", "--quiet", "--python", str(python), *args]
    else:
        cmd = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args]
    _step(cmd, f"installing {what or ' '.join(args)} ({'uv' if uv_bin else 'pip'})", progress)


def _step(cmd: list[str], what: str, progress: bool, timeout: float = 1500) -> str:
    """Run one set-up command: a line when it starts, one every 10 s while it runs, its time at the end."""
    t0 = time.monotonic()
    _say(progress, f"  peer venv: {what} ...")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while True:  # set-up is never silent for long
        try:
            out, err = proc.communicate(timeout=10)
            break
        except subprocess.TimeoutExpired:
            _say(progress, f"  ... {time.monotonic() - t0:.0f}s")
            if time.monotonic() - t0 > timeout:
                proc.kill()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out[-3000:]}\n{err[-3000:]}")
    _say(progress, f"  peer venv: {what}: done in {time.monotonic() - t0:.1f} s")
    return out


def _build_mosaic_venv(target: Path, progress: bool = False) -> None:
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        uv = _uv()  # uv makes the venv in a second; `python -m venv` also installs pip (which uv does not need)
        _step([uv, "venv", "--quiet", "--allow-existing", "--python", sys.executable, str(staging)] if uv
              else [sys.executable, "-m", "venv", str(staging)], "creating the venv", progress)
        python = staging / "bin" / "python"
        constraints = staging / "constraints.txt"
        constraints.write_text("torch==2.13.0\n")
        stub = staging / "torchvision-stub"
        for rel, text in _STUB_FILES.items():
            (stub / rel).parent.mkdir(parents=True, exist_ok=True)
            (stub / rel).write_text(textwrap.dedent(text).lstrip())
        links = _torch_wheel_dirs()[:1]
        _pip(python, *(["--find-links", links[0]] if links else []), "torch==2.13.0", progress=progress,
             what="torch==2.13.0 (CPU build)", uv=bool(links))
        # the stub first, so the real torchvision is never fetched
        _pip(python, "--no-deps", str(stub), progress=progress, what="the torchvision stub")
        _pip(python, "-c", str(constraints), "mosaicml-streaming==0.13.0", progress=progress,
             what="mosaicml-streaming==0.13.0")
        version = _step([str(python), "-I", "-c", "import streaming; print(streaming.__version__)"],
                        "checking that mosaicml-streaming imports (imports torch)", progress, timeout=300)
        if version.strip() != "0.13.0":
            raise RuntimeError(f"mosaicml-streaming {version.strip()!r} imports in {staging}, not 0.13.0")
        (staging / "READY").write_text(MOSAIC_KEY)
        # The venv's scripts hold absolute paths; we only ever run bin/python -m/-c, which is relocatable.
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def mosaic_python(progress: bool = False) -> Path:
    """The peer venv's Python, building the venv under a file lock if it is missing.

    progress=True (scripts/test.sh): one line per step on stderr, with its time."""
    from filelock import FileLock

    root = peers_dir()
    root.mkdir(parents=True, exist_ok=True)
    target = root / MOSAIC_KEY
    with FileLock(str(root / f"{MOSAIC_KEY}.lock"), timeout=1800):
        if not (target / "READY").exists():
            t0 = time.monotonic()
            _say(progress, f"building the mosaicml-streaming peer venv {target} (once) ...")
            shutil.rmtree(target, ignore_errors=True)
            _build_mosaic_venv(target, progress)
            _say(progress, f"mosaicml-streaming peer venv: done in {time.monotonic() - t0:.1f} s")
        else:
            _say(progress, f"mosaicml-streaming peer venv already built ({target})")
    return target / "bin" / "python"


class PeerRunner:
    def __init__(self, python: Path):
        self.python = python

    def __call__(self, script: str, *args: str, timeout: float = 300) -> str:
        with tempfile.TemporaryDirectory(prefix="foundry-peer-") as cwd:
            # TMPDIR too: mosaic's filelocks and scratch files land in the per-call folder, not /tmp
            env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")} | {"TMPDIR": cwd}
            proc = subprocess.run(
                [str(self.python), "-I", "-c", textwrap.dedent(script), *args],
                capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env,
            )
        if proc.returncode != 0:
            raise AssertionError(f"peer script failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
        return proc.stdout


@pytest.fixture(scope="session")
def mosaic_peer() -> PeerRunner:
    """Run Python scripts next to mosaicml-streaming 0.13.0 (see the module docstring)."""
    return PeerRunner(mosaic_python())
