"""Keys for the cloud-VM provider tests, made in-process (no ssh-keygen): an ed25519 SSH key in
OpenSSH's format (what `foundry create secret ssh` stores) and an RSA key for a cloud's API
credentials (a GCP service account, an OCI API key), with its public half for the test servers."""

from __future__ import annotations

import functools
import json

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa


def ssh_key() -> tuple[bytes, str]:
    """(the private key as the secret holds it, the public key line)."""
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return private, public.decode()


@functools.lru_cache(maxsize=1)
def rsa_key() -> tuple[str, bytes]:
    """(the private key PEM, the public key PEM): one per test process (2048-bit keys take a while)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public


def service_account(token_uri: str) -> str:
    """A GCP service-account key file's JSON (the fields google-auth reads), its token_uri given."""
    private, _ = rsa_key()
    return json.dumps({"type": "service_account", "project_id": "my-project", "private_key_id": "0123456789abcdef",
                       "private_key": private, "client_email": "foundry@my-project.iam.gserviceaccount.com",
                       "client_id": "104331234567890123456", "token_uri": token_uri,
                       "auth_uri": "https://accounts.google.com/o/oauth2/auth"})
