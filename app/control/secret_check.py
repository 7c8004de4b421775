"""Test a stored secret against a bucket: list a few keys with the secret's values in a scoped
environment (the variables and files its type injects into a job), then restore the environment.

Values never leave this module: the result is key names, and errors are masked.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

from foundry.plugins.errors import FoundryError, StorageError

from .secrets import mask

_ENV_LOCK = threading.Lock()


def check_bucket_access(cp, secret: str, url: str, limit: int = 5) -> list[str]:
    """The first `limit` keys under `url`, read with `secret`'s credentials (raises a FoundryError)."""
    injection = cp.secrets.injection(secret)
    values = cp.secrets.secret_values([secret])
    with _ENV_LOCK, tempfile.TemporaryDirectory(prefix="foundry-secret-") as tmp:
        os.chmod(tmp, 0o700)
        env = dict(injection.env)
        for path, content in injection.files.items():
            target = Path(tmp) / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(content if isinstance(content, bytes) else str(content).encode())
            env = {k: v.replace(path, str(target)) for k, v in env.items()}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            from foundry.plugins.manager import open_store

            keys = []
            for info in open_store(url).list(""):
                keys.append(info.key)
                if len(keys) >= limit:
                    break
            return keys
        except FoundryError as exc:
            raise type(exc)(mask(exc.message, values), hint=exc.hint) from None
        except Exception as exc:
            raise StorageError(f"cannot list {url}: {mask(f'{type(exc).__name__}: {exc}', values)}") from None
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
