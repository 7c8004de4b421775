"""Test a stored secret against a bucket: list a few keys with the secret's values in a scoped
environment (the variables and files its type injects into a job), then restore the environment.

Values never leave this module: the result is key names, and errors are masked.
"""

from __future__ import annotations

from foundry.plugins.errors import FoundryError, StorageError

from .secret_env import secret_environment
from .secrets import SecretStore, mask


def check_bucket_access(secrets: SecretStore, secret: str, url: str, limit: int = 5) -> list[str]:
    """The first `limit` keys under `url`, read with `secret`'s credentials (raises a FoundryError)."""
    values = secrets.secret_values([secret])
    with secret_environment(secrets, [secret]):
        try:
            from foundry.plugins.manager import open_store

            keys = []
            for info in open_store(url).list(""):
                keys.append(info.key)
                if len(keys) >= limit:
                    break
            return keys
        except FoundryError:
            raise  # masked by secret_environment
        except Exception as exc:
            raise StorageError(f"cannot list {url}: {mask(f'{type(exc).__name__}: {exc}', values)}") from None
