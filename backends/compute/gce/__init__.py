"""The `gce` compute provider: Compute Engine instances made for one resumption, run over the `ssh`
provider, deleted when it ends; every launch recorded in the ledger before it is asked for."""

from .provider import GceProvider

__all__ = ["GceProvider"]
