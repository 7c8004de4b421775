"""The one rule for the names users give things: runs, secrets, clusters and registered datasets.

    NAME_PATTERN = ^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$

A name is 1 to 63 lowercase letters, digits and '-', starting and ending with a letter or digit
(a DNS label, as Kubernetes and mcli names are). Such a name can never be a path ("..", "/"), an
option ("-x"), or a different file on a case-insensitive disk, so it may become a file or folder
name (secrets/NAME.json, runs/NAME/), a Slurm job name or a Kubernetes object name as it is.

Every entry point checks names through `check_name`: the run spec (name, secrets), the control
plane (the CLI, the TUI and the SDK all go through it) and the stores that turn a name into a path.
"""

from __future__ import annotations

import re

from foundry.plugins.errors import ConfigError

NAME_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
NAME_RE = re.compile(NAME_PATTERN)
NAME_RULE = "use 1-63 lowercase letters, digits and '-', starting and ending with a letter or digit"


def name_problem(kind: str, name: object) -> str | None:
    """Why `name` is not a valid `kind` name (None when it is)."""
    if not isinstance(name, str):
        return f"a {kind} name must be a string (got {type(name).__name__})"
    if not NAME_RE.match(name):
        shown = name if len(name) <= 80 else name[:77] + "..."
        return f"{shown!r} is not a valid {kind} name"
    return None


def check_name(kind: str, name: object) -> str:
    """`name` if it follows NAME_PATTERN, else a one-line ConfigError that says the rule."""
    problem = name_problem(kind, name)
    if problem:
        raise ConfigError(problem, hint=NAME_RULE)
    return name  # type: ignore[return-value]


# Environment variable names (env_variables keys, env secrets' keys): what every shell accepts.
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ENV_NAME_RULE = "letters, digits and '_', not starting with a digit (e.g. HF_TOKEN)"


def to_name(text: str, fallback: str = "dataset") -> str:
    """A valid name made from free text (a URL's last parts): lowercase, other characters -> '-'."""
    slug = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    slug = re.sub(r"-{2,}", "-", slug)[:63].strip("-")
    return slug or fallback
