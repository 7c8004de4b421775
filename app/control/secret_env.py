"""Stored secrets for the control plane's own reads (the TUI's dataset browser and Checkpoints tab,
`foundry dataset add --secret`): the environment a job would get, set in this process for the
duration of a `with` block, then restored.

The clouds' SDKs read credentials from the environment, so the secret's variables are set in
os.environ under one lock (one secret at a time in this process); file secrets are written 0600 to
a private temp folder that is removed afterwards. Values never leave this module: error messages
from inside the block are masked.
"""

from __future__ import annotations

import os
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from foundry.plugins.errors import FoundryError

from .secrets import SecretStore, mask

_ENV_LOCK = threading.RLock()


@contextmanager
def secret_environment(secrets: SecretStore, names: list[str] | tuple[str, ...]) -> Iterator[None]:
    names = [n for n in names if n]
    if not names:
        yield
        return
    values = secrets.secret_values(names)
    with _ENV_LOCK, tempfile.TemporaryDirectory(prefix="foundry-secret-") as tmp:
        os.chmod(tmp, 0o700)
        env: dict[str, str] = {}
        for name in names:
            injection = secrets.injection(name)
            part = dict(injection.env)
            for path, content in injection.files.items():
                target = Path(tmp) / name / path.lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(content if isinstance(content, bytes) else str(content).encode())
                part = {k: v.replace(path, str(target)) for k, v in part.items()}
            env.update(part)
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            yield
        except FoundryError as exc:
            raise type(exc)(mask(exc.message, values), hint=exc.hint) from None
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
