"""oci SDK failures, classified (retry or not) and translated into Foundry errors."""

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

from .remote import TruncatedRead

CREDENTIALS_HINT = "run `foundry create secret oci ...` or write ~/.oci/config (`oci setup config`)"


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, TruncatedRead):
        return True
    from oci import exceptions as oex

    if isinstance(exc, oex.ServiceError):
        return exc.status >= 500 or exc.status in (408, 429) or exc.code in ("TooManyRequests", "SlowDown")
    if isinstance(exc, (oex.RequestException, oex.ConnectTimeout, ConnectionError, TimeoutError)):
        return True
    try:
        import requests
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError))


def translate(exc: BaseException, url: str) -> FoundryError:
    if isinstance(exc, FoundryError):
        return exc
    from oci import exceptions as oex

    if isinstance(exc, (oex.ConfigFileNotFound, oex.InvalidConfig, oex.ProfileNotFound, oex.InvalidPrivateKey,
                        oex.InvalidKeyFilePath)):
        return CredentialsError(f"no usable OCI credentials for {url}: {type(exc).__name__} {exc}", hint=CREDENTIALS_HINT)
    if isinstance(exc, oex.ServiceError):
        code, status = exc.code, exc.status
        if code == "ObjectNotFound":
            return ObjectNotFoundError(f"no such object: {url}")
        if code == "BucketNotFound":
            return BucketNotFoundError(f"bucket of {url} does not exist", hint="create it first, or check the URL")
        if code == "NotAuthorizedOrNotFound":
            # OCI does not say which: the bucket is missing or these credentials may not see it.
            return BucketNotFoundError(f"bucket of {url} does not exist or is not visible to these credentials",
                                       hint="check the bucket name, namespace and the policy of this user")
        if status == 401 or code == "NotAuthenticated":
            return CredentialsError(f"credentials rejected for {url}", hint=CREDENTIALS_HINT)
        if status == 403:
            return AccessDeniedError(f"access denied to {url}",
                                     hint="the credentials work but lack permission for this operation")
        if status == 404:
            return ObjectNotFoundError(f"no such object: {url}")
        return StorageError(f"{url}: {exc.message} ({code}, HTTP {status})")
    if isinstance(exc, (oex.RequestException, oex.ConnectTimeout)):
        return StorageError(f"cannot reach OCI Object Storage for {url}", hint="check the endpoint and the network")
    return StorageError(f"{url}: {type(exc).__name__}: {exc}")


def give_up(url: str):
    def make(exc: BaseException, attempts: int) -> FoundryError:
        status = getattr(exc, "status", None)
        reason = f"{getattr(exc, 'code', '')} HTTP {status}".strip() if status else type(exc).__name__
        return TransientStorageError(
            f"{url}: giving up after {attempts} attempts ({reason})",
            hint="the store is failing or unreachable; retry later or raise the `attempts` option",
        )

    return make
