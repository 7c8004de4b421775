"""The `oci-vm` compute provider: OCI Compute instances made for one resumption, run over the `ssh`
provider, terminated when it ends; every launch recorded in the ledger before it is asked for."""

from .provider import OciVmProvider

__all__ = ["OciVmProvider"]
