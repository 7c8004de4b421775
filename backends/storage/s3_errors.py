"""botocore failures, classified (retry or not) and translated into Foundry's error hierarchy.

botocore is imported inside the functions: this module is imported with the s3 backend, which
must not pull boto3 in before a store is built.
"""

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

TRANSIENT_CODES = {
    "SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests",
    "RequestTimeout", "RequestTimeoutException", "InternalError", "ServiceUnavailable",
    "BandwidthLimitExceeded", "EC2ThrottledException", "PriorRequestNotComplete",
}
DENIED_CODES = {"AccessDenied", "AllAccessDisabled", "Forbidden", "403", "AccountProblem"}
BAD_KEY_CODES = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken",
                 "TokenRefreshRequired", "InvalidClientTokenId", "UnrecognizedClientException"}
CREDENTIALS_HINT = ("run `foundry create secret s3 ...` or set AWS_ACCESS_KEY_ID and "
                    "AWS_SECRET_ACCESS_KEY (and S3_ENDPOINT_URL for R2 or another S3-compatible store)")


def error_code(exc: BaseException) -> tuple[str, int]:
    response = getattr(exc, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    return code, status


def is_transient(exc: BaseException) -> bool:
    """True for failures worth another attempt: 5xx, throttling, resets, timeouts, short reads."""
    if isinstance(exc, TruncatedRead):
        return True
    from botocore import exceptions as bex

    if isinstance(exc, bex.ClientError):
        code, status = error_code(exc)
        return code in TRANSIENT_CODES or status >= 500 or status == 429
    if isinstance(exc, (bex.NoCredentialsError, bex.PartialCredentialsError, bex.ParamValidationError)):
        return False
    if isinstance(exc, (bex.ConnectionError, bex.HTTPClientError, bex.IncompleteReadError)):
        return True  # resets, refused, timeouts (connect and read), streaming errors
    try:
        from urllib3 import exceptions as u3
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, (u3.ProtocolError, u3.ReadTimeoutError, u3.IncompleteRead, ConnectionError, TimeoutError))


def translate(exc: BaseException, url: str, endpoint: str | None) -> FoundryError:
    """A Foundry error (with a hint) for a permanent failure on `url`."""
    if isinstance(exc, FoundryError):
        return exc
    from botocore import exceptions as bex

    where = f" at {endpoint}" if endpoint else ""
    if isinstance(exc, (bex.NoCredentialsError, bex.PartialCredentialsError)):
        return CredentialsError(f"no credentials for {url}", hint=CREDENTIALS_HINT)
    if isinstance(exc, bex.ClientError):
        code, status = error_code(exc)
        if code in ("NoSuchKey", "NotFound") or (status == 404 and code in ("404", "")):
            return ObjectNotFoundError(f"no such object: {url}")
        if code == "NoSuchBucket":
            bucket = url.split("/")[2] if url.count("/") >= 2 else url
            return BucketNotFoundError(f"bucket {bucket!r} does not exist{where}",
                                       hint="create it first, or check the URL and S3_ENDPOINT_URL")
        if code in BAD_KEY_CODES:
            return CredentialsError(f"credentials rejected for {url}{where} ({code})", hint=CREDENTIALS_HINT)
        if code in DENIED_CODES or status == 403:
            return AccessDeniedError(f"access denied to {url}{where}",
                                     hint="the credentials work but lack permission for this operation")
        message = exc.response.get("Error", {}).get("Message") or code
        return StorageError(f"{url}: {message} ({code or status})")
    if isinstance(exc, bex.EndpointConnectionError):
        return StorageError(f"cannot reach the S3 endpoint{where or ' for ' + url}",
                            hint="check S3_ENDPOINT_URL (or the endpoint_url option) and the network")
    if isinstance(exc, bex.ParamValidationError):
        return StorageError(f"invalid request for {url}: {exc}")
    return StorageError(f"{url}: {type(exc).__name__}: {exc}")


def give_up(url: str, endpoint: str | None):
    """`on_give_up` for call_with_retries: the last transient error, said plainly."""

    def make(exc: BaseException, attempts: int) -> FoundryError:
        from botocore import exceptions as bex

        where = f" at {endpoint}" if endpoint else ""
        if isinstance(exc, bex.EndpointConnectionError):
            return TransientStorageError(
                f"cannot reach the S3 endpoint{where} for {url} after {attempts} attempts",
                hint="check S3_ENDPOINT_URL (or the endpoint_url option) and the network",
            )
        code, status = error_code(exc)
        reason = code or (f"HTTP {status}" if status else type(exc).__name__)
        return TransientStorageError(
            f"{url}: giving up after {attempts} attempts ({reason})",
            hint="the store is failing or throttling; retry later or raise the `attempts` option",
        )

    return make
