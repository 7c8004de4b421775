"""Vendor failures become Foundry errors with hints: missing bucket, key, credentials, denied, unreachable."""

from __future__ import annotations

import socket

import pytest

from foundry.plugins.errors import (
    AccessDeniedError,
    BucketNotFoundError,
    ConfigError,
    CredentialsError,
    ObjectNotFoundError,
    TransientStorageError,
)
from foundry.plugins.manager import open_store


@pytest.mark.integration
def test_missing_bucket(s3_bucket):
    store = open_store("s3://no-such-bucket-here/x")
    with pytest.raises(BucketNotFoundError) as info:
        list(store.list())
    assert "no-such-bucket-here" in info.value.message and info.value.hint


@pytest.mark.integration
def test_missing_key(s3_bucket):
    store = open_store(s3_bucket.url)
    with pytest.raises(ObjectNotFoundError, match="no such object: s3://.*/nope"):
        store.get("nope")


@pytest.mark.integration
def test_wrong_secret_is_a_credentials_error(s3_bucket):
    store = open_store(s3_bucket.url, {**s3_bucket.options, "secret_access_key": "wrong-secret", "attempts": 5})
    with pytest.raises(CredentialsError) as info:
        store.put("k", b"v")
    assert "foundry create secret s3" in info.value.hint
    assert "wrong-secret" not in str(info.value)


@pytest.mark.integration
def test_read_only_identity_is_denied_writes(s3_bucket):
    key, secret = s3_bucket.server.readonly_key
    s3_bucket.client().put_object(Bucket=s3_bucket.name, Key="r", Body=b"readable")
    store = open_store(s3_bucket.url, {**s3_bucket.options, "access_key_id": key, "secret_access_key": secret})
    assert store.get("r") == b"readable"
    with pytest.raises(AccessDeniedError) as info:
        store.put("w", b"v")
    assert info.value.hint


@pytest.mark.integration
def test_no_credentials(s3_bucket, monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(CredentialsError) as info:
        open_store(s3_bucket.url).get("k")
    assert "AWS_ACCESS_KEY_ID" in info.value.hint and "foundry create secret s3" in info.value.hint


def test_unreachable_endpoint_after_the_configured_attempts(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    options = {"endpoint_url": f"http://127.0.0.1:{port}", "access_key_id": "a", "secret_access_key": "b",
               "attempts": 2, "retry_base_delay": 0.01}
    with pytest.raises(TransientStorageError) as info:
        open_store("s3://bucket/x", options).get("k")
    assert "cannot reach the S3 endpoint" in info.value.message and "after 2 attempts" in info.value.message
    assert "S3_ENDPOINT_URL" in info.value.hint


def test_r2_needs_an_endpoint(monkeypatch):
    for name in ("S3_ENDPOINT_URL", "R2_ENDPOINT_URL", "R2_ACCOUNT_ID"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError, match="r2:// needs an endpoint"):
        open_store("r2://bucket")
    monkeypatch.setenv("R2_ACCOUNT_ID", "acct")
    assert open_store("r2://bucket").settings.endpoint_url == "https://acct.r2.cloudflarestorage.com"


def test_bad_options_are_config_errors():
    with pytest.raises(ConfigError):
        open_store("s3://bucket", {"attempts": 0})
    with pytest.raises(ConfigError):
        open_store("s3://bucket", {"part_size": 1024})
    with pytest.raises(ConfigError):
        open_store("s3://bucket", {"endpoint_url": "localhost:9000"})


def test_clients_are_shared_per_destination():
    from foundry.backends.storage.s3_client import S3Settings, get_client

    a = S3Settings.resolve("s3", {"endpoint_url": "http://127.0.0.1:1", "access_key_id": "k", "secret_access_key": "s"})
    b = S3Settings.resolve("s3", {"endpoint_url": "http://127.0.0.1:1", "access_key_id": "k", "secret_access_key": "s"})
    c = S3Settings.resolve("s3", {"endpoint_url": "http://127.0.0.1:1", "access_key_id": "k", "secret_access_key": "t"})
    assert get_client(a) is get_client(b)
    assert get_client(a) is not get_client(c)
    assert "s" not in repr(a).split("secret")[0] or "secret_access_key" not in repr(a)
    config = get_client(a).meta.config
    assert config.request_checksum_calculation == "when_required"
    assert config.response_checksum_validation == "when_required"
    assert config.retries["total_max_attempts"] == 1
