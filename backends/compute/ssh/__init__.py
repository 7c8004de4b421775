"""The `ssh` compute provider: a fleet of machines reached over SSH (OpenSSH client, no SDK)."""

from .provider import SshProvider

__all__ = ["SshProvider"]
