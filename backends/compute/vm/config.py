"""Option checks every cloud-VM provider's config shares (one line each, what to type instead)."""

from __future__ import annotations

from typing import Any

from foundry.plugins.errors import ConfigError

# keys a VM cluster hands to the ssh provider with the instances' addresses
SSH_KEYS = {"python", "remote_dir", "setup", "workdir", "connect_timeout", "ssh_options", "packages", "index_url",
            "uv", "known_hosts"}


def whole(raw: dict[str, Any], key: str, default: int, where: str) -> int:
    value = raw.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{where}: {key} must be a whole number >= 0, not {value!r}", hint=f"-o {key}=N")
    return value


def as_bool(raw: dict[str, Any], key: str, where: str, default: bool = False) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: {key} must be true or false, not {value!r}", hint=f"-o {key}=true")
    return value
