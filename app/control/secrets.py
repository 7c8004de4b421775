"""Stored secrets: one JSON file per secret in FOUNDRY_HOME/secrets, mode 0600, directory 0700.

Values leave this module only as a SecretInjection for a job (env vars / mounted files, per the
secret type registered through `register_secret_types`). Listing shows names, kinds, field names
and the values of non-secret fields (endpoint, region) only. Error messages never quote values.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

from foundry.plugins.atomic_files import atomic_write
from foundry.plugins.errors import ConfigError, CredentialsError
from foundry.plugins.manager import secret_type_registry
from foundry.plugins.secrets import SecretInjection, SecretType

from foundry.app.names import ENV_NAME_RE, ENV_NAME_RULE, check_name, name_problem

from .models import SecretInfo
from .secret_vault import KeyringVault


def secret_type(kind: str) -> SecretType:
    reg = secret_type_registry().get(kind)
    if reg is None:
        kinds = ", ".join(secret_type_registry().names())
        raise ConfigError(f"unknown secret type {kind!r}", hint=f"installed types: {kinds}")
    return reg.value


class SecretStore:
    def __init__(self, directory: Path, vault: KeyringVault | None = None):
        self.dir = Path(directory)
        self.vault = vault   # None: values in the 0600 file; else secret fields in the OS keyring

    def _path(self, name: str) -> Path:
        return self.dir / f"{check_name('secret', name)}.json"  # every read, write and delete

    def _ensure_dir(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)

    def create(self, name: str, kind: str, values: dict[str, str], overwrite: bool = False) -> SecretInfo:
        check_name("secret", name)
        stype = secret_type(kind)
        known = {f.name for f in stype.fields}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"secret type {kind!r} has no field(s) {', '.join(unknown)}",
                              hint=f"fields: {', '.join(f.name for f in stype.fields)}")
        values = {k: str(v) for k, v in values.items() if v is not None and str(v) != ""}
        missing = [f.name for f in stype.fields if f.required and f.name not in values]
        if missing:
            raise ConfigError(f"secret type {kind!r} needs {', '.join(missing)}")
        bad = [k for k in stype.inject(name, values).env if not ENV_NAME_RE.match(k)]
        if bad:  # variable names only: a name is never a secret value
            raise ConfigError(f"{kind} secret {name!r}: {', '.join(map(repr, bad))} is not a valid environment "
                              "variable name", hint=ENV_NAME_RULE)
        path = self._path(name)
        with self._locked():  # check and write as one: of two creates with one name, one is refused
            if path.exists() and not overwrite:
                raise ConfigError(f"a secret named {name!r} already exists",
                                  hint=f"`foundry delete secret {name}` first")
            record = {"name": name, "kind": kind, "created_at": time.time(), "values": values}
            if self.vault is not None:
                secret = {f.name for f in stype.fields if f.secret}
                self.vault.put(name, {k: v for k, v in values.items() if k in secret})
                record.update(values={k: v for k, v in values.items() if k not in secret},
                              vault=self.vault.name, fields=sorted(values))
            atomic_write(path, json.dumps(record), mode=0o600, fsync=True)  # created 0600, never chmod-ed
        return self._info(record, stype)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """The store's write lock (an flock on secrets/.lock, released when the process dies): the
        exists-check and the write of create, and delete, never interleave across processes. Where
        flock does not exist (Windows) this is a no-op and the old check-then-rename race remains."""
        self._ensure_dir()
        fd = os.open(self.dir / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _read(self, name: str) -> dict:
        record = self._read_record(name)
        if record.get("vault") == "keyring":
            record["values"] = {**record["values"], **self._keyring(name).get(name)}
        return record

    def _keyring(self, name: str) -> KeyringVault:
        if self.vault is not None:
            return self.vault
        if not KeyringVault.usable():
            raise CredentialsError(f"secret {name!r} is in the OS keyring, which is not reachable now",
                                   hint="install `keyring` and unlock the OS keyring, or recreate the secret")
        return KeyringVault(self.dir.parent)

    def _read_record(self, name: str) -> dict:
        try:
            return json.loads(self._path(name).read_text())
        except FileNotFoundError:
            raise CredentialsError(f"no secret named {name!r}",
                                   hint="`foundry get secrets` lists them; `foundry create secret` adds one") from None
        except (OSError, ValueError):
            raise CredentialsError(f"secret {name!r} is unreadable or corrupt",
                                   hint=f"recreate it: `foundry delete secret {name}` then `foundry create secret`") from None

    def _info(self, record: dict, stype: SecretType | None) -> SecretInfo:
        public = {}
        if stype is not None:
            public = {f.name: record["values"][f.name] for f in stype.fields
                      if not f.secret and f.name in record["values"]}
        return SecretInfo(name=record["name"], kind=record["kind"], created_at=record["created_at"],
                          fields=sorted(record.get("fields") or record["values"]), public=public)

    def list(self) -> list[SecretInfo]:
        if not self.dir.exists():
            return []
        infos = []
        for path in sorted(self.dir.glob("*.json")):
            if name_problem("secret", path.stem):
                continue  # not one of ours (no name we write looks like that)
            record = self._read_record(path.stem)   # listing never needs the keyring's values
            reg = secret_type_registry().get(record["kind"])
            infos.append(self._info(record, reg.value if reg else None))
        return infos

    def exists(self, name: str) -> bool:
        return self._path(name).exists()

    def delete(self, name: str) -> None:
        path = self._path(name)
        if not self.dir.exists():
            raise ConfigError(f"no secret named {name!r}")
        with self._locked():
            try:
                if json.loads(path.read_text()).get("vault") == "keyring" and KeyringVault.usable():
                    self._keyring(name).delete(name)
            except (OSError, ValueError):
                pass  # missing (reported below) or corrupt (deleted below)
            try:
                path.unlink()
            except FileNotFoundError:
                raise ConfigError(f"no secret named {name!r}") from None

    def injection(self, name: str) -> SecretInjection:
        record = self._read(name)
        return secret_type(record["kind"]).inject(name, dict(record["values"]))

    def secret_values(self, names: list[str]) -> list[str]:
        """The secret (masked) values of these secrets, for scrubbing plans and messages."""
        out = []
        for name in names:
            record = self._read(name)
            reg = secret_type_registry().get(record["kind"])
            secret_fields = {f.name for f in reg.value.fields if f.secret} if reg else set(record["values"])
            out += [v for k, v in record["values"].items() if k in secret_fields and v]
        return out


def mask(text: str, values: list[str]) -> str:
    for value in sorted(set(values), key=len, reverse=True):
        if len(value) >= 4:
            text = text.replace(value, "***")
    return text
