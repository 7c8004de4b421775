"""Making a run's environment ready on a host: the cluster's python (checked for torch + foundry, as
Slurm clusters' are) or a venv this provider builds with uv, reused while it has both.

The check and the build are plain shell over ssh (before it there may be no foundry on the host);
what each took is returned, and the job's log says it.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass
from importlib import metadata

from foundry.plugins.errors import ProviderError

from .client import SshClient
from .config import Host, SshConfig

MISSING = ("import importlib.util as u; "
           "print(' '.join(n for n in ('torch', 'foundry') if u.find_spec(n) is None))")
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


@dataclass(frozen=True)
class Ready:
    python: str
    how: str          # "cluster python" | "uv venv (reused)" | "uv venv (built)"
    seconds: float

    def note(self, host: Host) -> str:
        return f"environment ready on {host} in {self.seconds:.1f} s: {self.how} {self.python}"


def default_packages(gpus: bool) -> list[str]:
    """This machine's torch and foundry versions, so a moved run keeps its numerics."""
    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None
    torch = version("torch")
    if torch and not gpus:
        torch = torch.split("+")[0]
    foundry = version("foundry-anywhere")
    return [f"torch=={torch}" if torch else "torch", f"foundry-anywhere=={foundry}" if foundry else "foundry-anywhere"]


def venv_script(config: SshConfig, venv: str) -> str:
    """Shell that builds (or keeps) the uv venv at `venv` (relative to the login folder)."""
    packages = config.packages or default_packages(config.gpus_per_host > 0)
    index = config.index_url or (None if config.gpus_per_host > 0 else CPU_INDEX)
    uv = shlex.quote(config.uv)
    install = f"{uv} pip install -q --python {shlex.quote(venv)}/bin/python {shlex.join(packages)}"
    if index:   # the CPU wheels' index first (a plain torch pulls GBs of CUDA), PyPI for the rest
        install += f" --index-url {shlex.quote(index)} --extra-index-url https://pypi.org/simple"
    return (f"command -v {uv} >/dev/null || {{ echo 'uv is not installed on this host' >&2; exit 7; }}; "
            f"{uv} venv -q --allow-existing {shlex.quote(venv)} && {install}")


def missing(client: SshClient, host: Host, python: str) -> list[str] | None:
    """What `python` on `host` cannot import (None: it does not run)."""
    proc = client.run(host, [python, "-c", MISSING], check=False, timeout=120)
    return proc.stdout.decode().split() if proc.returncode == 0 else None


def ensure(client: SshClient, host: Host, config: SshConfig) -> Ready:
    t0 = time.monotonic()
    if config.python:
        lacks = missing(client, host, config.python)
        if lacks is None or lacks:
            what = "does not run" if lacks is None else f"cannot import {' and '.join(lacks)}"
            raise ProviderError(f"ssh {host}: python {config.python!r} {what}",
                                hint="give -o python=PATH of an interpreter with torch and foundry on every host, "
                                     "or leave it out to have a uv venv built")
        return Ready(config.python, "cluster python", time.monotonic() - t0)
    venv = f"{config.remote_root(host)}/venv"
    python = f"{venv}/bin/python"
    if missing(client, host, python) == []:
        return Ready(python, "uv venv (reused)", time.monotonic() - t0)
    proc = client.shell(host, venv_script(config, venv), check=False, timeout=1800)
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        raise ProviderError(f"ssh {host}: building the uv venv failed: {err[-1] if err else proc.returncode}",
                            hint="install uv on the host (curl -LsSf https://astral.sh/uv/install.sh | sh), "
                                 "or give -o python=PATH of an interpreter with torch and foundry")
    lacks = missing(client, host, python)
    if lacks:
        raise ProviderError(f"ssh {host}: the uv venv still cannot import {' and '.join(lacks)}",
                            hint="set -o packages=[...] (and -o index_url) to what installs them on the hosts")
    return Ready(python, "uv venv (built)", time.monotonic() - t0)
