"""gs:// failures against fake-gcs-server: missing bucket and key, unreachable endpoint, emulator detection."""

from __future__ import annotations

import socket

import pytest

from foundry.plugins.errors import BucketNotFoundError, CredentialsError, ObjectNotFoundError, TransientStorageError
from foundry.plugins.manager import open_store


@pytest.mark.integration
def test_missing_key_and_bucket(gcs_bucket):
    with pytest.raises(ObjectNotFoundError, match=f"no such object: gs://{gcs_bucket.name}/nope"):
        open_store(gcs_bucket.url).get("nope")
    with pytest.raises(BucketNotFoundError):
        list(open_store("gs://no-such-bucket-here").list())


@pytest.mark.integration
def test_emulator_host_is_honoured(gcs_bucket):
    store = open_store(gcs_bucket.url)  # only STORAGE_EMULATOR_HOST, no options
    assert store.anonymous and store.endpoint == gcs_bucket.server.endpoint
    store.put("k", b"v")
    assert gcs_bucket.client().bucket(gcs_bucket.name).blob("k").download_as_bytes() == b"v"


def test_unreachable_endpoint_after_the_configured_attempts(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{port}")
    store = open_store("gs://bucket", {"attempts": 2, "retry_base_delay": 0.01})
    with pytest.raises(TransientStorageError, match="after 2 attempts"):
        store.get("k")


def test_no_credentials(monkeypatch, tmp_path):
    for name in ("STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))  # no gcloud application-default credentials
    monkeypatch.setenv("NO_GCE_CHECK", "True")  # not on Google Compute Engine
    with pytest.raises(CredentialsError) as info:
        open_store("gs://bucket").get("k")
    assert "foundry create secret gcp" in info.value.hint
