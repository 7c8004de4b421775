"""The one error hierarchy every layer raises and the CLI/TUI present.

A FoundryError carries a one-line `message` (what went wrong) and an optional `hint` (what to do
next). Messages never contain secret values. `exit_code` is what the CLI exits with: 2 for usage,
configuration and credential problems the user must fix, 1 for runtime failures.
"""

from __future__ import annotations


class FoundryError(Exception):
    """Base of every error Foundry raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class ConfigError(FoundryError):
    """Bad user input: a malformed URL, an invalid run spec, an unknown option value."""

    exit_code = 2


class PluginError(ConfigError):
    """A plugin could not be loaded, or two plugins claim the same name."""


class CredentialsError(FoundryError):
    """Credentials are missing or rejected."""

    exit_code = 2


class StorageError(FoundryError):
    """An object store operation failed."""


class ObjectNotFoundError(StorageError):
    """The key does not exist in the store."""


class BucketNotFoundError(StorageError):
    """The bucket (or container, or root folder) does not exist."""

    exit_code = 2


class AccessDeniedError(CredentialsError):
    """The credentials are valid but not allowed to do this."""


class TransientStorageError(StorageError):
    """A failure worth retrying (5xx, throttling, reset, timeout); raised after the last attempt."""


class DataError(FoundryError):
    """A dataset is malformed, corrupt or does not match the requested state."""


class CheckpointError(FoundryError):
    """A checkpoint is missing, incomplete or does not match the model."""


class ProviderError(FoundryError):
    """A compute provider failed to plan, launch, observe or stop a job."""
