"""google-cloud-storage failures, classified (retry or not) and translated into Foundry errors."""

from __future__ import annotations

from foundry.plugins.errors import (
    AccessDeniedError,
    BucketNotFoundError,
    CredentialsError,
    FoundryError,
    ObjectNotFoundError,
    StorageError,
    TransientStorageError,
)

CREDENTIALS_HINT = ("run `foundry create secret gcp ...` or set GOOGLE_APPLICATION_CREDENTIALS "
                    "(STORAGE_EMULATOR_HOST for an emulator)")


def _status(exc: BaseException) -> int:
    code = getattr(exc, "code", None)
    if isinstance(code, int):
        return code
    response = getattr(exc, "response", None)
    return int(getattr(response, "status_code", 0) or 0)


def is_transient(exc: BaseException) -> bool:
    from google.api_core import exceptions as gex

    if isinstance(exc, gex.GoogleAPICallError):
        status = _status(exc)
        return status >= 500 or status in (408, 429)
    try:
        import requests
        from google.auth import exceptions as aex
        from google.resumable_media import common as rmc
    except ImportError:  # pragma: no cover
        return False
    if isinstance(exc, rmc.InvalidResponse):
        status = _status(exc)
        return status >= 500 or status in (408, 429)
    if isinstance(exc, rmc.DataCorruption):
        return True
    if isinstance(exc, (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError,
                        aex.TransportError, ConnectionError, TimeoutError)):
        return True
    from .remote import TruncatedRead

    return isinstance(exc, TruncatedRead)


def translate(exc: BaseException, url: str, endpoint: str | None) -> FoundryError:
    if isinstance(exc, FoundryError):
        return exc
    from google.api_core import exceptions as gex
    from google.auth import exceptions as aex

    if isinstance(exc, aex.DefaultCredentialsError):
        return CredentialsError(f"no credentials for {url}", hint=CREDENTIALS_HINT)
    if isinstance(exc, aex.RefreshError):
        return CredentialsError(f"credentials rejected for {url}: {exc}", hint=CREDENTIALS_HINT)
    status = _status(exc)
    message = str(getattr(exc, "message", "") or exc)
    if isinstance(exc, gex.NotFound) or status == 404:
        if "bucket" in message.lower() and "object" not in message.lower():
            bucket = url.split("/")[2]
            return BucketNotFoundError(f"bucket {bucket!r} does not exist", hint="create it first, or check the URL")
        return ObjectNotFoundError(f"no such object: {url}")
    if isinstance(exc, gex.Unauthorized) or status == 401:
        return CredentialsError(f"credentials rejected for {url}", hint=CREDENTIALS_HINT)
    if isinstance(exc, gex.Forbidden) or status == 403:
        return AccessDeniedError(f"access denied to {url}",
                                 hint="the credentials work but lack permission for this operation")
    try:
        import requests

        if isinstance(exc, requests.ConnectionError):
            return StorageError(f"cannot reach GCS{' at ' + endpoint if endpoint else ''} for {url}",
                                hint="check STORAGE_EMULATOR_HOST / the endpoint_url option and the network")
    except ImportError:  # pragma: no cover
        pass
    return StorageError(f"{url}: {type(exc).__name__}: {message}")


def give_up(url: str, endpoint: str | None):
    def make(exc: BaseException, attempts: int) -> FoundryError:
        status = _status(exc)
        reason = f"HTTP {status}" if status else type(exc).__name__
        return TransientStorageError(
            f"{url}: giving up after {attempts} attempts ({reason})",
            hint="the store is failing or unreachable; retry later or raise the `attempts` option",
        )

    return make
