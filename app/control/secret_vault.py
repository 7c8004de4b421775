"""Where secret values rest: the 0600 JSON file (default) or the OS keyring (opt-in).

    FOUNDRY_SECRET_STORE=keyring   values of secret fields go to the OS keyring (macOS Keychain,
                                   Windows Credential Locker, Secret Service / KWallet on Linux)
                                   through the optional `keyring` package; the 0600 file keeps
                                   the name, kind and non-secret fields only.
    FOUNDRY_SECRET_STORE=file      (default) everything in FOUNDRY_HOME/secrets/NAME.json, 0600.

Asked for the keyring where `keyring` is not installed or has no usable backend (a headless
server), Foundry falls back to the file and says so once. Entries are keyed by FOUNDRY_HOME, so two
homes never share a secret.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from foundry.plugins.errors import ConfigError, CredentialsError

log = logging.getLogger("foundry.control")
CHOICES = ("file", "keyring")
_warned = False


class KeyringVault:
    name = "keyring"

    def __init__(self, home: Path):
        import keyring

        self._keyring = keyring
        self.service = f"foundry:{Path(home).absolute()}"

    @staticmethod
    def usable() -> bool:
        try:
            import keyring
            from keyring.backends import fail
        except ImportError:
            return False
        backend = keyring.get_keyring()
        return not isinstance(backend, fail.Keyring) and getattr(backend, "priority", 0) > 0

    def put(self, name: str, values: dict[str, str]) -> None:
        self._keyring.set_password(self.service, name, json.dumps(values))

    def get(self, name: str) -> dict[str, str]:
        raw = self._keyring.get_password(self.service, name)
        if raw is None:
            raise CredentialsError(f"secret {name!r} has no values in the OS keyring",
                                   hint=f"recreate it: `foundry delete secret {name}` then `foundry create secret`")
        return json.loads(raw)

    def delete(self, name: str) -> None:
        try:
            self._keyring.delete_password(self.service, name)
        except self._keyring.errors.PasswordDeleteError:
            pass  # already gone


def choose_vault(setting: str | None, home: Path) -> KeyringVault | None:
    """The keyring vault when asked for and usable; None means the 0600 file."""
    global _warned
    setting = (setting or "file").strip().lower()
    if setting not in CHOICES:
        raise ConfigError(f"FOUNDRY_SECRET_STORE={setting!r} is not one of {', '.join(CHOICES)}")
    if setting == "file":
        return None
    if KeyringVault.usable():
        return KeyringVault(home)
    if not _warned:
        _warned = True
        log.warning("FOUNDRY_SECRET_STORE=keyring, but the `keyring` package or an OS keyring backend is "
                    "missing: secrets are stored in 0600 files under FOUNDRY_HOME/secrets")
    return None
