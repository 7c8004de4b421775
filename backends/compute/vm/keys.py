"""The public half of an `ssh` secret's private key, in OpenSSH's one-line form: what GCE (metadata
`ssh-keys`) and OCI (metadata `ssh_authorized_keys`) put in the login's authorized_keys. The private
key never leaves this machine."""

from __future__ import annotations

from foundry.plugins.errors import ConfigError


def public_key(private_key: bytes, cluster: str) -> str:
    try:
        from cryptography.hazmat.primitives import serialization
    except ImportError:   # both SDKs' own dependencies bring it; say so if it is missing anyway
        raise ConfigError("the cloud-VM providers need the `cryptography` package to read the ssh key",
                          hint="pip install cryptography") from None
    try:
        if b"OPENSSH PRIVATE KEY" in private_key:
            key = serialization.load_ssh_private_key(private_key, password=None)
        else:
            key = serialization.load_pem_private_key(private_key, password=None)
        line = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    except (ValueError, TypeError, NotImplementedError) as exc:
        raise ConfigError(f"cluster {cluster!r}: its ssh secret is not an unencrypted private key ({exc})",
                          hint="foundry create secret ssh NAME --private-key PATH (a key without a passphrase)") from None
    return line.decode()
