"""Cloud compute providers (managed Kubernetes), contributed through `register_compute`.

The clouds' credential kinds (s3, gcp, oci) are registered by the secrets plugin, not here.
"""

from __future__ import annotations

from foundry.plugins.hookspecs import hookimpl


@hookimpl
def register_compute(register):
    from .aws.eks import EKSProvider
    from .gcp.gke import GKEProvider
    from .oci.oke import OKEProvider

    register("eks", EKSProvider)
    register("gke", GKEProvider)
    register("oke", OKEProvider)
