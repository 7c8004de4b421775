"""Where an S3 store connects and with which credentials; boto3 clients cached per destination.

Settings are resolved once, when a store is built, from the store options and the environment
(never at import time). Client creation costs tens of milliseconds and a lot of memory, so clients
are shared per (process, endpoint, region, credentials, timeouts, pool size).
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Mapping

from foundry.plugins.errors import ConfigError

_clients: dict[tuple, Any] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class S3Settings:
    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    profile: str | None = None
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    max_pool_connections: int = 16

    @classmethod
    def resolve(cls, scheme: str, options: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> "S3Settings":
        env = os.environ if environ is None else environ
        endpoint = options.get("endpoint_url") or env.get("S3_ENDPOINT_URL") or None
        region = options.get("region") or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None
        if scheme == "r2":
            endpoint = options.get("endpoint_url") or env.get("R2_ENDPOINT_URL") or env.get("S3_ENDPOINT_URL")
            account = options.get("account_id") or env.get("R2_ACCOUNT_ID")
            if not endpoint and account:
                endpoint = f"https://{account}.r2.cloudflarestorage.com"
            if not endpoint:
                raise ConfigError(
                    "r2:// needs an endpoint",
                    hint="set S3_ENDPOINT_URL=https://ACCOUNT.r2.cloudflarestorage.com (or R2_ACCOUNT_ID)",
                )
            region = region or "auto"
        if endpoint and "://" not in endpoint:
            raise ConfigError(f"malformed S3 endpoint {endpoint!r}", hint="expected e.g. https://host:port")
        key = options.get("access_key_id") or env.get("AWS_ACCESS_KEY_ID") or None
        secret = options.get("secret_access_key") or env.get("AWS_SECRET_ACCESS_KEY") or None
        token = options.get("session_token") or (env.get("AWS_SESSION_TOKEN") if not options.get("access_key_id") else None)
        return cls(
            endpoint_url=endpoint,
            region=region or "us-east-1",
            access_key_id=key,
            secret_access_key=secret,
            session_token=token or None,
            profile=options.get("profile") or (None if key else env.get("AWS_PROFILE")),
            connect_timeout=float(options.get("connect_timeout", cls.connect_timeout)),
            read_timeout=float(options.get("read_timeout", cls.read_timeout)),
            max_pool_connections=int(options.get("max_pool_connections", cls.max_pool_connections)),
        )

    def cache_key(self) -> tuple:
        secret = hashlib.sha256((self.secret_access_key or "").encode()).hexdigest()
        token = hashlib.sha256((self.session_token or "").encode()).hexdigest()
        return (self.endpoint_url, self.region, self.access_key_id, secret, token, self.profile,
                self.connect_timeout, self.read_timeout, self.max_pool_connections)


def get_client(settings: S3Settings):
    """A shared boto3 S3 client for these settings, with botocore's own retries turned off."""
    key = (os.getpid(), *settings.cache_key())  # a forked worker builds its own (sockets are not shared)
    client = _clients.get(key)
    if client is not None:
        return client
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = _make_client(settings)
        return client


def _make_client(settings: S3Settings):
    import boto3
    import botocore.session
    from botocore.config import Config

    core = botocore.session.get_session()
    if settings.profile:
        core.set_config_variable("profile", settings.profile)
    if settings.endpoint_url:
        # Not AWS: never wait on the EC2 instance metadata service for credentials.
        resolver = core.get_component("credential_provider")
        for name in ("iam-role", "container-role"):
            try:
                resolver.remove(name)
            except Exception:  # pragma: no cover - provider absent in this botocore
                pass
    session = boto3.session.Session(botocore_session=core)
    extra: dict[str, Any] = {}
    if settings.endpoint_url:
        # boto3 >= 1.36 sends CRC checksums by default, which R2 and OCI's S3 endpoint reject.
        extra = {"request_checksum_calculation": "when_required", "response_checksum_validation": "when_required"}
    config = Config(
        retries={"total_max_attempts": 1, "mode": "standard"},  # our RetryPolicy is what counts
        connect_timeout=settings.connect_timeout,
        read_timeout=settings.read_timeout,
        max_pool_connections=settings.max_pool_connections,
        s3={"addressing_style": "path"} if settings.endpoint_url else None,
        **extra,
    )
    credentials = {}
    if settings.access_key_id and settings.secret_access_key:
        credentials = {
            "aws_access_key_id": settings.access_key_id,
            "aws_secret_access_key": settings.secret_access_key,
            "aws_session_token": settings.session_token,
        }
    return session.client("s3", endpoint_url=settings.endpoint_url, region_name=settings.region,
                          config=config, **credentials)
