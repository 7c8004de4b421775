"""`${NAME}` in a run spec file's env_variables values and trainer parameters: filled from the
environment of whoever submits the run, so an example can say `DATA_URL: ${BUCKET}/tiny-gpt/data`
instead of a bucket the reader cannot have.

Only there: `command` is left alone (its `$RANK`, `${LOCAL_RANK}` are the job shell's to expand),
and `{run_name}` (one brace, no `$`) is the trainer's. A variable that is not set is a one-line error
at submit time, never an empty string in a URL the job trips on minutes later. `$${NAME}` keeps a
literal `${NAME}`.
"""

from __future__ import annotations

import os
import re
from typing import Any, Mapping

from foundry.plugins.errors import ConfigError

_VAR = re.compile(r"\$(\$?)\{([A-Za-z_][A-Za-z0-9_]*)\}")
EXPANDED_KEYS = ("env_variables", "parameters")


def _fill(text: str, where: str, source: str, environ: Mapping[str, str]) -> str:
    def one(match: re.Match) -> str:
        escaped, name = match.groups()
        if escaped:
            return "${" + name + "}"
        if not environ.get(name):
            raise ConfigError(f"{source}: {where} uses ${{{name}}}, which is not set in this environment",
                              hint=f"export {name}=... (e.g. your bucket: export {name}=s3://your-bucket) and run again")
        return environ[name]

    return _VAR.sub(one, text)


def _walk(value: Any, where: str, source: str, environ: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _fill(value, where, source, environ) if "${" in value else value
    if isinstance(value, dict):
        return {k: _walk(v, f"{where}.{k}", source, environ) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, f"{where}[{i}]", source, environ) for i, v in enumerate(value)]
    return value


def expand_variables(data: Any, source: str, environ: Mapping[str, str] | None = None) -> Any:
    """`data` (a parsed spec) with `${NAME}` filled in env_variables and parameters."""
    if not isinstance(data, dict):
        return data
    environ = os.environ if environ is None else environ
    out = dict(data)
    for key in EXPANDED_KEYS:
        if key in out:
            out[key] = _walk(out[key], key, source, environ)
    return out
