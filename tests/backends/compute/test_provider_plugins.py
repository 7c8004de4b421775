"""Compute providers are plugins: the built-ins register through `register_compute`, and a
third-party provider registered in-process works through the same contract."""

from __future__ import annotations

import itertools

from foundry.plugins.compute import (
    Capabilities,
    ComputeProvider,
    JobHandle,
    JobRequest,
    JobState,
    JobStatus,
    Plan,
)
from foundry.plugins.hookspecs import hookimpl
from foundry.plugins.manager import compute_registry, register_plugin, unregister_plugin


def test_builtin_providers_are_registered_with_their_plugin():
    registry = compute_registry()
    expected = {"slurm": "foundry.backends.compute.plugin",
                "kubernetes": "foundry.backends.compute.plugin",
                "eks": "foundry.backends.clouds.plugin", "gke": "foundry.backends.clouds.plugin",
                "oke": "foundry.backends.clouds.plugin"}
    for name, plugin in expected.items():
        registration = registry.get(name)
        assert registration is not None and registration.plugin == plugin
        assert registration.value.name == name
        assert isinstance(registration.value.capabilities, Capabilities)


class EchoProvider:
    """A complete third-party provider in a dozen lines: jobs 'run' instantly and complete."""

    name = "echo"
    capabilities = Capabilities(multi_node=False, graceful_stop=True)
    _ids = itertools.count(1)

    def __init__(self, cluster_config):
        self.config = cluster_config
        self.jobs: dict[str, JobStatus] = {}

    def dryrun(self, request: JobRequest) -> Plan:
        return Plan(provider=self.name, request=request, summary=f"echo {request.command}",
                    artifacts={"command": " ".join(request.command)})

    def launch(self, plan: Plan) -> JobHandle:
        job_id = str(next(self._ids))
        self.jobs[job_id] = JobStatus(JobState.COMPLETED, exit_code=0)
        return JobHandle(provider=self.name, cluster=self.config.get("name", "echo"), job_id=job_id,
                         data={"run_name": plan.request.run_name})

    def status(self, handle: JobHandle) -> JobStatus:
        return self.jobs.get(handle.job_id, JobStatus(JobState.LOST))

    def logs(self, handle, follow=False, rank=None):
        yield f"echo job {handle.job_id}"

    def stop(self, handle, graceful=True):
        self.jobs[handle.job_id] = JobStatus(JobState.PAUSED if graceful else JobState.LOST)

    def list(self):
        return [JobHandle(self.name, "echo", job_id) for job_id in self.jobs]

    def describe(self):
        return {"provider": self.name, "nodes": 1, "devices": 1, "state": "ready"}


class EchoPlugin:
    @hookimpl
    def register_compute(self, register):
        register("echo", EchoProvider)


def test_third_party_provider_plugin_goes_through_dryrun_launch_status():
    name = register_plugin(EchoPlugin(), name="foundry-echo")
    try:
        registration = compute_registry().get("echo")
        assert registration.value is EchoProvider and registration.plugin == "foundry-echo"
        provider = registration.value({"name": "echo-cluster"})
        assert isinstance(provider, ComputeProvider)
        request = JobRequest(run_name="hello", run_id="r1", resumption=0, command=["python", "-c", "print(1)"])
        plan = provider.dryrun(request)
        assert plan.artifacts["command"] == "python -c print(1)"
        handle = provider.launch(plan)
        assert provider.status(handle).state == JobState.COMPLETED
        assert list(provider.logs(handle)) == [f"echo job {handle.job_id}"]
        assert [h.job_id for h in provider.list()] == [handle.job_id]
    finally:
        unregister_plugin(name)
    assert compute_registry().get("echo") is None
