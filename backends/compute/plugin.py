"""Built-in compute providers (local, Slurm, Kubernetes, ssh fleets, ec2, gce, oci-vm), contributed through the same
`register_compute` hook third-party plugins use. Provider modules are imported only when the hook
runs, and import their SDKs only when used."""

from __future__ import annotations

from foundry.plugins.hookspecs import hookimpl


@hookimpl
def register_compute(register):
    from .ec2 import Ec2Provider
    from .gce import GceProvider
    from .kubernetes import KubernetesProvider
    from .local import LocalProvider
    from .oci_vm import OciVmProvider
    from .slurm import SlurmProvider
    from .ssh import SshProvider

    register("local", LocalProvider)
    register("slurm", SlurmProvider)
    register("kubernetes", KubernetesProvider)
    register("ssh", SshProvider)
    register("ec2", Ec2Provider)
    register("gce", GceProvider)
    register("oci-vm", OciVmProvider)
