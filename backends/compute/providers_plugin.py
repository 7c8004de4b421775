"""The Slurm and Kubernetes compute providers, contributed through `register_compute`
(the same hook third-party plugins use). Provider modules import their SDKs only when used."""

from __future__ import annotations

from foundry.plugins.hookspecs import hookimpl


@hookimpl
def register_compute(register):
    from .kubernetes import KubernetesProvider
    from .slurm import SlurmProvider

    register("slurm", SlurmProvider)
    register("kubernetes", KubernetesProvider)
