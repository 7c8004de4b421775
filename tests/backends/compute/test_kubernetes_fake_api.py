"""The kubernetes provider's client calls, made by the REAL kubernetes Python client against a
FAKE loopback API server (tests/backends/compute/k8s_fake.py). The fake has no controllers: each
test plays the cluster's part (pods, Job conditions). Real-cluster test: skipped unless KUBECONFIG."""

from __future__ import annotations

import os

import pytest

from foundry.backends.compute.kubernetes import KubernetesProvider
from foundry.backends.compute.kubernetes.provider import STOP_ANNOTATION
from foundry.plugins.compute import JobRequest, JobState, SecretMount
from foundry.plugins.errors import CredentialsError, ProviderError

from .k8s_fake import FakeKubeAPI

NS = "ml"


class _Provider(KubernetesProvider):
    """The kubernetes provider, pointed at the fake through an in-memory kubeconfig."""

    fake: FakeKubeAPI

    def kubeconfig(self):
        return self.fake.kubeconfig()


@pytest.fixture
def fake():
    api = FakeKubeAPI().start()
    yield api
    api.stop()


@pytest.fixture
def provider(fake):
    p = _Provider({"namespace": NS, "context": "fake", "image": "img:1", "name": "k8s-test"})
    p.fake = fake
    return p


def _request(**kw) -> JobRequest:
    base = dict(run_name="gpt", run_id="rid", resumption=1, command=["train.py"], nodes=2, procs_per_node=2,
                env={"TOKEN": "s3cr3t"}, secret_files=[SecretMount("/etc/key.json", b"KEY")])
    base.update(kw)
    return JobRequest(**base)


def test_fake_api_launch_creates_owned_objects_and_unsuspends(fake, provider):
    handle = provider.launch(provider.dryrun(_request()))
    name = handle.job_id
    job = fake.get("jobs", NS, name)
    assert job["spec"]["suspend"] is False
    uid = job["metadata"]["uid"]
    for resource in ("secrets", "services"):
        owner = fake.get(resource, NS, name)["metadata"]["ownerReferences"][0]
        assert owner["kind"] == "Job" and owner["uid"] == uid
    assert fake.get("secrets", NS, name)["stringData"] == {"TOKEN": "s3cr3t", "file-0": "KEY"}
    methods = [m for m, path in fake.requests]
    assert methods == ["POST", "POST", "POST", "PATCH"]   # Job (suspended), Secret, Service, unsuspend
    assert [h.job_id for h in provider.list()] == [name]
    assert provider.list()[0].data["run_name"] == "gpt" and provider.list()[0].data["procs_per_node"] == 2


def test_fake_api_status_follows_the_job_and_its_pods(fake, provider):
    handle = provider.launch(provider.dryrun(_request()))
    name = handle.job_id
    assert provider.status(handle).state == JobState.PENDING
    fake.set_job_status(NS, name, active=2)
    fake.add_pod(NS, name, 0, "Pending")
    assert provider.status(handle).state == JobState.PENDING
    fake.add_pod(NS, name, 0, "Running", log="rank 0 up\nstep 1\n")
    fake.add_pod(NS, name, 1, "Running", log="rank 2 up\n")
    assert provider.status(handle).state == JobState.RUNNING
    assert list(provider.logs(handle)) == ["rank 0 up", "step 1"]
    assert list(provider.logs(handle, rank=3)) == ["rank 2 up"]     # ranks 2-3 run in pod 1
    fake.set_job_status(NS, name, succeeded=2, conditions=[{"type": "Complete", "status": "True"}])
    status = provider.status(handle)
    assert status.state == JobState.COMPLETED and status.exit_code == 0


@pytest.mark.parametrize("exit_code,reason,expected", [
    (75, "PodFailurePolicy", JobState.PAUSED),
    (3, "BackoffLimitExceeded", JobState.FAILED),
    (137, "BackoffLimitExceeded", JobState.LOST),   # OOMKilled
])
def test_fake_api_failed_jobs_map_by_exit_code(fake, provider, exit_code, reason, expected):
    handle = provider.launch(provider.dryrun(_request()))
    fake.add_pod(NS, handle.job_id, 0, "Failed", exit_code=exit_code,
                 reason="OOMKilled" if exit_code == 137 else "Error")
    fake.set_job_status(NS, handle.job_id, failed=1, conditions=[
        {"type": "Failed", "status": "True", "reason": reason,
         "message": f"Container trainer for pod ml/x failed with exit code {exit_code} matching FailJob rule at index 0"}])
    status = provider.status(handle)
    assert status.state == expected and status.exit_code == exit_code


def test_fake_api_graceful_stop_suspends_then_paused(fake, provider):
    handle = provider.launch(provider.dryrun(_request()))
    fake.set_job_status(NS, handle.job_id, active=2)
    provider.stop(handle, graceful=True)
    job = fake.get("jobs", NS, handle.job_id)
    assert job["spec"]["suspend"] is True and job["metadata"]["annotations"][STOP_ANNOTATION] == "graceful"
    assert provider.status(handle).state == JobState.STOPPING
    fake.set_job_status(NS, handle.job_id, active=0, conditions=[{"type": "Suspended", "status": "True"}])
    assert provider.status(handle).state == JobState.PAUSED


def test_fake_api_hard_stop_deletes_everything_and_the_job_is_lost(fake, provider):
    handle = provider.launch(provider.dryrun(_request()))
    provider.stop(handle, graceful=False)
    assert not [k for k in fake.objects if k[2] == handle.job_id]
    assert provider.status(handle).state == JobState.LOST
    provider.stop(handle, graceful=False)   # 404s are fine: already gone
    provider.stop(handle, graceful=True)


def test_fake_api_conflict_and_credentials_errors(fake, provider):
    plan = provider.dryrun(_request())
    provider.launch(plan)
    with pytest.raises(ProviderError, match="already exists"):
        provider.launch(plan)
    fake.token = "rotated"
    with pytest.raises(CredentialsError):
        provider.list()


def test_fake_api_describe_counts_nodes_and_gpus(fake, provider):
    for i, gpus in enumerate((8, 8)):
        fake.objects[("nodes", "", f"n{i}")] = {
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
            "status": {"capacity": {"cpu": "96", "nvidia.com/gpu": str(gpus)},
                       "conditions": [{"type": "Ready", "status": "True" if i == 0 else "False"}]}}
    info = provider.describe()
    assert info["nodes"] == 2 and info["gpus"] == 16 and info["devices"] == 16 and info["state"] == "ready"
    assert [n["state"] for n in info["node_list"]] == ["ready", "not ready"]


def test_fake_api_describe_without_permission_to_list_nodes(fake, provider):
    fake.forbidden.add("nodes")
    info = provider.describe()
    assert info["state"] == "ready" and info["nodes"] is None and "permission" in info["note"]


@pytest.mark.skipif(not os.environ.get("KUBECONFIG"), reason="real-cluster test: set KUBECONFIG to run it")
def test_real_cluster_describe():
    info = KubernetesProvider({"namespace": os.environ.get("FOUNDRY_TEST_K8S_NAMESPACE", "default")}).describe()
    assert info["nodes"] >= 1


@pytest.mark.skipif(not (os.environ.get("KUBECONFIG") and os.environ.get("FOUNDRY_TEST_K8S_IMAGE")),
                    reason="real-cluster test: set KUBECONFIG and FOUNDRY_TEST_K8S_IMAGE (python + torch) to run it")
def test_real_cluster_two_pod_job_completes():
    import time

    provider = KubernetesProvider({"namespace": os.environ.get("FOUNDRY_TEST_K8S_NAMESPACE", "default"),
                                   "image": os.environ["FOUNDRY_TEST_K8S_IMAGE"]})
    code = "import torch.distributed as d; d.init_process_group('gloo'); print('rank', d.get_rank(), 'of', d.get_world_size())"
    handle = provider.launch(provider.dryrun(JobRequest("foundry-k8s-test", "t1", 0, ["python", "-c", code],
                                                        nodes=2, procs_per_node=1)))
    try:
        deadline = time.monotonic() + 600
        while not provider.status(handle).state.terminal and time.monotonic() < deadline:
            time.sleep(5)
        assert provider.status(handle).state == JobState.COMPLETED
        assert any("of 2" in line for line in provider.logs(handle))
    finally:
        provider.stop(handle, graceful=False)
