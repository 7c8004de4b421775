"""A cloud store's SDK is an optional extra: when it is missing, say which extra installs it."""

from __future__ import annotations

import importlib.util

from foundry.plugins.errors import ConfigError


def require_sdk(module: str, scheme: str, extra: str) -> None:
    """ConfigError (exit 2) naming the extra when `module` cannot be imported; checked, not imported."""
    if importlib.util.find_spec(module.split(".")[0]) is None:
        raise ConfigError(f"{scheme}:// needs the {module} package, which is not installed",
                          hint=f"pip install 'foundry-anywhere[{extra}]' (in this repository: "
                               f"bash scripts/setup.sh {extra})")
