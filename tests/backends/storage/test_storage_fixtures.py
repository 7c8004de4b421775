"""The shared server fixtures work: a fresh bucket per test, reachable through env and options."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def test_s3_bucket_is_fresh_and_reachable(s3_bucket, s3_server):
    client = s3_bucket.client()
    client.put_object(Bucket=s3_bucket.name, Key="a/b.txt", Body=b"hello")
    assert client.get_object(Bucket=s3_bucket.name, Key="a/b.txt")["Body"].read() == b"hello"
    other = s3_server.create_bucket()
    assert client.list_objects_v2(Bucket=other).get("KeyCount", 0) == 0


def test_s3_env_is_set(s3_bucket, s3_server):
    import os

    assert os.environ["S3_ENDPOINT_URL"] == s3_server.endpoint
    assert s3_bucket.url == f"s3://{s3_bucket.name}"


def test_gcs_bucket_is_fresh_and_reachable(gcs_bucket):
    bucket = gcs_bucket.client().bucket(gcs_bucket.name)
    bucket.blob("x/y").upload_from_string(b"data")
    assert bucket.blob("x/y").download_as_bytes(start=1, end=2) == b"at"
    assert [b.name for b in gcs_bucket.client().list_blobs(gcs_bucket.name)] == ["x/y"]
