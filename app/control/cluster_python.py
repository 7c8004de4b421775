"""Which Python a Slurm cluster's jobs run with, decided when the cluster is created.

Without a `python` option the cluster gets the interpreter of the environment that creates it (the
one with torch and foundry: the README's set-up), never the nodes' bare `python3`. A `python` given
on this machine is checked then and there, so a missing torch is a clear error at `create cluster`,
not a job that dies without a reason. Clusters reached over ssh are not checked (their Python is
on another machine).
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from foundry.plugins.errors import ConfigError

_MISSING = ("import importlib.util as u; "
            "print(' '.join(n for n in ('torch', 'foundry') if u.find_spec(n) is None))")


def with_job_python(name: str, provider: str, options: dict[str, Any]) -> dict[str, Any]:
    if provider != "slurm" or options.get("ssh_host"):
        return options
    if not options.get("python"):
        return {**options, "python": sys.executable}
    python = str(options["python"])
    try:
        proc = subprocess.run([python, "-c", _MISSING], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"cluster {name!r}: python {python!r} does not run ({type(exc).__name__})",
                          hint=f"leave -o python out to use {sys.executable}, or give a venv's bin/python") from None
    missing = proc.stdout.split() if proc.returncode == 0 else ["torch", "foundry"]
    if missing:
        raise ConfigError(f"cluster {name!r}: python {python!r} cannot import {' and '.join(missing)}",
                          hint=f"leave -o python out to use {sys.executable} (this environment), or install "
                               "foundry there (bash scripts/setup.sh)")
    return options
