"""S3 and S3-compatible stores (AWS, Cloudflare R2, SeaweedFS, MinIO): `s3://bucket/prefix`, `r2://...`.

boto3 is imported only when a store is built. Options (all optional; see also S3Settings):
endpoint_url, region, access_key_id, secret_access_key, session_token, profile, connect_timeout,
read_timeout, attempts, retry_base_delay, retry_max_delay, retry_deadline, part_size, concurrency,
multipart_threshold. Every request goes through our RetryPolicy; botocore's retries are off (why: docs/storage.md).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from foundry.plugins.errors import ConfigError, FoundryError
from foundry.plugins.retry import call_with_retries
from foundry.plugins.storage import (
    ObjectInfo,
    ProgressCallback,
    StorageURL,
    atomic_destination,
    check_key,
    join_key,
)

from . import s3_errors
from .remote import RemoteStore, TruncatedRead
from .request_gate import RequestGate
from .s3_client import S3Settings, get_client
from .sdk_check import require_sdk
from .transfer import (
    TransferConfig,
    parallel_download,
    parallel_upload_parts,
    retry_policy_from,
)

T = TypeVar("T")
_STREAM_CHUNK = 1 << 20


class S3Store(RemoteStore):
    scheme = "s3"

    def __init__(self, bucket: str, prefix: str, settings: S3Settings, options: dict[str, Any] | None = None):
        options = options or {}
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.settings = settings
        self.policy = retry_policy_from(options)
        self.transfer = TransferConfig.from_options(options)
        # file downloads of this store: at most `concurrency` requests at once, first asked first served
        self.download_gate = RequestGate(self.transfer.concurrency)
        root = f"{self.scheme}://{bucket}"
        self.url = f"{root}/{self.prefix}" if self.prefix else root
        self._client = None

    @classmethod
    def from_url(cls, url: str, options: dict[str, Any] | None = None) -> "S3Store":
        options = dict(options or {})
        require_sdk("boto3", cls.scheme, "aws")
        parsed = StorageURL.parse(url)
        if parsed.scheme != cls.scheme:
            raise ConfigError(f"{url!r} is not an {cls.scheme}:// URL")
        return cls(parsed.bucket, parsed.prefix, S3Settings.resolve(cls.scheme, options), options)

    # -- plumbing ------------------------------------------------------------------------------

    @property
    def client(self):
        if self._client is None:
            try:
                self._client = get_client(self.settings)
            except FoundryError:
                raise
            except Exception as exc:
                raise s3_errors.translate(exc, self.url, self.settings.endpoint_url) from exc
        return self._client

    def _key(self, key: str) -> str:
        return join_key(self.prefix, check_key(key, self.url))

    def _call(self, key: str, fn: Callable[[], T]) -> T:
        """Run one request (including reading its body) under the retry policy; map errors."""
        url = self.child_url(key)
        endpoint = self.settings.endpoint_url
        try:
            return call_with_retries(fn, policy=self.policy, is_transient=s3_errors.is_transient,
                                     on_give_up=s3_errors.give_up(url, endpoint))
        except FoundryError:
            raise
        except Exception as exc:
            raise s3_errors.translate(exc, url, endpoint) from exc

    def _read_body(self, response: dict) -> bytes:
        data = response["Body"].read()
        expected = response.get("ContentLength")
        if expected is not None and len(data) != expected:
            raise TruncatedRead(f"got {len(data)} of {expected} bytes")
        return data

    # -- reads ---------------------------------------------------------------------------------

    def _get_whole(self, key: str) -> bytes:
        full = self._key(key)
        return self._call(key, lambda: self._read_body(self.client.get_object(Bucket=self.bucket, Key=full)))

    def get_range(self, key: str, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        full = self._key(key)

        def fetch() -> bytes:
            from botocore.exceptions import ClientError

            try:
                response = self.client.get_object(Bucket=self.bucket, Key=full, Range=f"bytes={start}-{end - 1}")
            except ClientError as exc:
                if s3_errors.error_code(exc)[0] == "InvalidRange":
                    return b""  # start is past the end of the object
                raise
            return self._read_body(response)

        return self._call(key, fetch)

    def head(self, key: str) -> ObjectInfo:
        full = self._key(key)
        response = self._call(key, lambda: self.client.head_object(Bucket=self.bucket, Key=full))
        modified = response.get("LastModified")
        return ObjectInfo(key.lstrip("/"), int(response["ContentLength"]), _etag(response.get("ETag")),
                          modified.timestamp() if modified else None)

    def get_file(self, key: str, path: str | os.PathLike, progress: ProgressCallback | None = None) -> None:
        with self.download_gate.turn() as ticket:  # in line in the order files are asked for
            self._get_file(key, path, progress, ticket)

    def _get_file(self, key: str, path: str | os.PathLike, progress: ProgressCallback | None, ticket: int) -> None:
        info = self.head(key)
        if info.size <= self.transfer.threshold:
            full = self._key(key)

            def fetch_all() -> int:
                response = self.client.get_object(Bucket=self.bucket, Key=full)
                with atomic_destination(path) as tmp, open(tmp, "wb") as out:
                    written = 0
                    for chunk in response["Body"].iter_chunks(_STREAM_CHUNK):
                        out.write(chunk)
                        written += len(chunk)
                    if written != response.get("ContentLength", written):
                        raise TruncatedRead(f"got {written} of {response['ContentLength']} bytes")
                return written

            with self.download_gate.slot(ticket):
                written = self._call(key, fetch_all)
            if progress:
                progress(written)
            return
        parallel_download(path, info.size, lambda s, e: self._range_exact(key, s, e, info.etag),
                          self.transfer, progress, gate=self.download_gate, ticket=ticket)

    def _range_exact(self, key: str, start: int, end: int, etag: str | None = None) -> bytes:
        full = self._key(key)
        extra = {"IfMatch": f'"{etag}"'} if etag else {}

        def fetch() -> bytes:
            response = self.client.get_object(Bucket=self.bucket, Key=full, Range=f"bytes={start}-{end - 1}", **extra)
            data = self._read_body(response)
            if len(data) != end - start:
                raise TruncatedRead(f"range {start}-{end} returned {len(data)} bytes")
            return data

        return self._call(key, fetch)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        full_prefix, strip = self._list_prefix(prefix)
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": full_prefix}
            if token:
                kwargs["ContinuationToken"] = token
            page = self._call(prefix, lambda: self.client.list_objects_v2(**kwargs))
            for item in page.get("Contents", []):
                modified = item.get("LastModified")
                yield ObjectInfo(item["Key"][strip:], int(item["Size"]), _etag(item.get("ETag")),
                                 modified.timestamp() if modified else None)
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    def _list_level(self, full_prefix: str) -> tuple[list[str], list[ObjectInfo]]:
        prefixes: list[str] = []
        objects: list[ObjectInfo] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": full_prefix, "Delimiter": "/"}
            if token:
                kwargs["ContinuationToken"] = token
            page = self._call(full_prefix, lambda: self.client.list_objects_v2(**kwargs))
            prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
            for item in page.get("Contents", []):
                modified = item.get("LastModified")
                objects.append(ObjectInfo(item["Key"], int(item["Size"]), _etag(item.get("ETag")),
                                          modified.timestamp() if modified else None))
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return prefixes, objects

    # -- writes --------------------------------------------------------------------------------

    def put(self, key: str, data: bytes) -> None:
        full = self._key(key)
        self._call(key, lambda: self.client.put_object(Bucket=self.bucket, Key=full, Body=bytes(data)))

    def put_file(self, key: str, path: str | os.PathLike, progress: ProgressCallback | None = None) -> None:
        size = Path(path).stat().st_size
        if self._put_small_file(key, path, size, progress):
            return
        full = self._key(key)
        created = self._call(key, lambda: self.client.create_multipart_upload(Bucket=self.bucket, Key=full))
        upload_id = created["UploadId"]

        def upload(number: int, data: bytes) -> dict:
            response = self._call(key, lambda: self.client.upload_part(
                Bucket=self.bucket, Key=full, UploadId=upload_id, PartNumber=number, Body=data))
            return {"PartNumber": number, "ETag": response["ETag"]}

        try:
            parts = parallel_upload_parts(path, size, upload, self.transfer, progress)
            self._call(key, lambda: self.client.complete_multipart_upload(
                Bucket=self.bucket, Key=full, UploadId=upload_id, MultipartUpload={"Parts": parts}))
        except BaseException:
            try:
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=full, UploadId=upload_id)
            except Exception:
                pass  # best effort; lifecycle rules clean up what is left
            raise

    def delete(self, key: str) -> None:
        full = self._key(key)
        self._call(key, lambda: self.client.delete_object(Bucket=self.bucket, Key=full))

    def delete_many(self, keys: list[str]) -> None:
        """Delete keys in batches of 1,000 (one request each)."""
        for i in range(0, len(keys), 1000):
            batch = [{"Key": self._key(k)} for k in keys[i:i + 1000]]

            def request(batch=batch) -> None:
                response = self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
                errors = response.get("Errors") or []
                if errors:
                    from botocore.exceptions import ClientError

                    first = errors[0]
                    raise ClientError({"Error": {"Code": first.get("Code", ""), "Message": first.get("Message", "")}},
                                      "DeleteObjects")

            self._call(keys[i], request)


class R2Store(S3Store):
    """Cloudflare R2: S3 with the endpoint from S3_ENDPOINT_URL, R2_ENDPOINT_URL or R2_ACCOUNT_ID."""

    scheme = "r2"


def _etag(value: str | None) -> str | None:
    return value.strip('"') if value else None
