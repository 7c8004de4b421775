"""The one error hierarchy every layer raises and the CLI/TUI present.

A FoundryError carries a one-line `message` (what went wrong) and an optional `hint` (what to do
next). Messages never contain secret values. `exit_code` is what the CLI exits with: 2 for usage,
configuration and credential problems the user must fix, 1 for runtime failures.
"""

from __future__ import annotations

import json


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


# mosaicml-streaming compatibility: where mosaic raises a built-in exception, Foundry's streaming
# API raises one of these, so a switched script's `except ValueError:` still catches it, the CLI
# still maps it as a FoundryError, and the message stays one line.
class ConfigValueError(ConfigError, ValueError):
    """An argument mosaic refuses with ValueError."""


class DataValueError(DataError, ValueError):
    """Data or a state mosaic refuses with ValueError (a checksum failure, a state that does not fit)."""


class DataRuntimeError(DataError, RuntimeError):
    """Where mosaic raises RuntimeError (a stream with no index.json and no remote)."""


class DataFileNotFoundError(DataError, FileNotFoundError):
    """A dataset file that is not there (mosaic: FileNotFoundError)."""


class DataFileExistsError(DataError, FileExistsError):
    """A writer's output that already holds data (mosaic: FileExistsError)."""


class DataJSONDecodeError(DataError, json.JSONDecodeError):
    """An index.json that is not JSON (mosaic lets json.JSONDecodeError through)."""

    def __init__(self, message: str, hint: str | None = None, doc: str = "", pos: int = 0):
        ValueError.__init__(self, message)  # not JSONDecodeError's: its arguments are (msg, doc, pos)
        self.message, self.hint = message, hint
        self.msg, self.doc, self.pos = message, doc, pos
        self.lineno = doc.count("\n", 0, pos) + 1
        self.colno = pos - doc.rfind("\n", 0, pos)

    def __reduce__(self):  # pickled across DataLoader workers with this class's own arguments
        return type(self), (self.message, self.hint, self.doc, self.pos)


def config_errors_as_value_errors(fn):
    """Decorate a mosaic-compatible constructor: a ConfigError raised anywhere inside it (the order
    planner's checks included) leaves as a ConfigValueError with the same message and hint, as mosaic
    refuses every bad argument with ValueError."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ConfigError as exc:
            if isinstance(exc, ValueError):
                raise
            raise ConfigValueError(exc.message, hint=exc.hint).with_traceback(exc.__traceback__) from exc.__cause__

    return wrapper
