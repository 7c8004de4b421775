"""The gce provider against RECORDED Compute Engine responses (recorded/gce/) replayed by a loopback
server into the REAL google-cloud-compute client and google-auth service-account credentials.
Every insert body is checked against the SDK's schema and GCE's naming/label rules by the server
(gce_recorded.check_insert). No GCP project is reached: this proves the requests Foundry sends and
how it reads the answers, not that GCE accepts them today (docs/providers.md#gce)."""

from __future__ import annotations

import json
import uuid
from types import SimpleNamespace

import pytest

from foundry.backends.compute.gce import GceProvider
from foundry.backends.compute.gce.config import GceConfig
from foundry.backends.compute.vm import base as vm_base
from foundry.backends.compute.vm.base import NoCapacityError
from foundry.plugins.compute import JobRequest
from foundry.plugins.errors import ConfigError, ProviderError

from support.gce_recorded import RECORDED, RecordedGCE
from support.vm_keys import rsa_key, service_account, ssh_key


@pytest.fixture
def gce():
    server = RecordedGCE(public_key_pem=rsa_key()[1]).start()
    yield server
    server.stop()


@pytest.fixture
def make(gce, tmp_path):
    private, public = ssh_key()

    def provider(**options) -> GceProvider:
        raw = {"name": "g", "project": "my-project", "zone": "us-central1-a", "machine_type": "n2-standard-8",
               "endpoint": gce.url, "secret": "gce-key", "credentials": "gcp", "state_dir": str(tmp_path / "state"),
               **options,
               "secret_injection": SimpleNamespace(files={"/foundry/secrets/gce-key/id_key": private}),
               "credentials_injection": SimpleNamespace(
                   files={"/foundry/secrets/gcp/credentials.json": service_account(f"{gce.url}/token").encode()})}
        p = GceProvider(raw)
        p.public = public
        return p

    return provider


def _launch(provider: GceProvider, run: str = "gpt", nodes: int = 1, resumption: int = 0):
    plan = provider.dryrun(JobRequest(run, "run-id-1", resumption, ["train.py"], nodes=nodes))
    token = plan.request.extra["vm_token"]
    return plan, token


def test_recorded_bodies_parse_with_the_sdk_types_strictly():
    from google.cloud import compute_v1

    compute_v1.Instance.from_json((RECORDED / "instance.json").read_text(), ignore_unknown_fields=False)
    for name in ("operation_running.json", "operation_done.json", "operation_zone_exhausted.json"):
        compute_v1.Operation.from_json((RECORDED / name).read_text(), ignore_unknown_fields=False)


def test_create_with_machine_type_labels_ssh_key_disk_and_subnet(make, gce):
    provider = make(disk_size_gb=100, subnet="training", ssh_user="ml")
    plan, token = _launch(provider, run="My.Run_X", nodes=2)
    ids = provider.create(plan.request, token, provider.names(plan.request, token), provider.public)
    assert ids == [f"foundry-{token}-0", f"foundry-{token}-1"] and gce.live() == ids
    body = gce.inserts[0]
    assert body["machineType"] == "zones/us-central1-a/machineTypes/n2-standard-8"
    assert body["labels"] == {"foundry-token": token, "foundry-run": "my-run_x", "foundry-run-id": "run-id-1",
                              "foundry-resumption": "0", "foundry-cluster": "g"}   # lowercased: GCE's rule
    assert token.startswith("my-run-x-r0-")
    assert body["metadata"]["items"] == [{"key": "ssh-keys", "value": f"ml:{provider.public}"}]
    assert body["disks"][0]["initializeParams"] == {"sourceImage": "projects/debian-cloud/global/images/family/debian-12",
                                                    "diskSizeGb": "100"}
    assert body["networkInterfaces"][0]["subnetwork"] == "regions/us-central1/subnetworks/training"
    assert body["networkInterfaces"][0]["accessConfigs"] == [{"name": "External NAT", "type": "ONE_TO_ONE_NAT"}]
    assert "scheduling" not in body and "guestAccelerators" not in body
    # a repeated insert of the same instance of the same launch is the same request
    assert gce.request_ids[0] == str(uuid.uuid5(uuid.NAMESPACE_URL, f"foundry:{token}:{ids[0]}"))
    [vm0, vm1] = provider.lookup(ids)
    assert vm0.state == "running" and vm0.address == "127.0.0.1" and vm0.type == "n2-standard-8"


def test_gpus_pick_from_the_catalogue_with_their_accelerator(make, gce):
    t4 = make(machine_type=None, gpus=1, gpu_type="t4", image="projects/my-project/global/images/cuda")
    plan, token = _launch(t4)
    t4.create(plan.request, token, t4.names(plan.request, token), t4.public)
    body = gce.inserts[-1]
    assert body["machineType"].endswith("/n1-standard-8")
    assert body["guestAccelerators"] == [{"acceleratorType": "zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4",
                                          "acceleratorCount": 1}]
    assert body["scheduling"] == {"onHostMaintenance": "TERMINATE"}
    l4 = make(machine_type=None, gpus=1, gpu_type="l4", image="projects/my-project/global/images/cuda")
    assert l4.config.machine_type == "g2-standard-8" and l4.config.accelerator is None   # G2 comes with its GPU
    with pytest.raises(ConfigError, match="needs an image with its driver"):
        make(machine_type=None, gpus=1).dryrun(JobRequest("gpt", "r", 0, ["train.py"]))


def test_spot_is_provisioning_model_spot_deleted_when_preempted(make, gce):
    provider = make(spot=True)
    assert provider.capabilities.preemption_notice and provider.notice == "gce"
    plan, token = _launch(provider)
    assert "(spot)" in plan.summary
    [name] = provider.create(plan.request, token, provider.names(plan.request, token), provider.public)
    assert gce.inserts[-1]["scheduling"] == {"provisioningModel": "SPOT", "instanceTerminationAction": "DELETE",
                                             "automaticRestart": False, "onHostMaintenance": "TERMINATE"}
    [row] = provider.instances()
    assert row["spot"] is True and row["price_per_hour"] == 0.094 and row["instance"] == name


def test_list_by_labels_and_clean_deletes_only_this_clusters_leftovers(make, gce):
    provider = make()
    plan, token = _launch(provider)
    [kept] = provider.create(plan.request, token, provider.names(plan.request, token), provider.public)
    gce.add("foundry-orphan-r0-0000-0", {"foundry-cluster": "g", "foundry-token": "orphan-r0-0000",
                                         "foundry-run": "gone", "foundry-resumption": "0"})
    gce.add("someone-elses", {"team": "web"})
    gce.add("foundry-other-0", {"foundry-cluster": "other", "foundry-token": "other-r0-1111"})
    rows = {r["instance"]: r for r in provider.instances()}
    assert set(rows) == {kept, "foundry-orphan-r0-0000-0"}
    assert rows["foundry-orphan-r0-0000-0"]["run"] == "gone" and rows[kept]["cost"] >= 0
    assert any('labels.foundry-cluster = "g"' in c or "instances" in c for c in gce.calls)
    assert provider.clean_instances(keep_tokens={token}) == ["foundry-orphan-r0-0000-0"]
    assert gce.live() == sorted([kept, "someone-elses", "foundry-other-0"])


def test_ssh_that_never_answers_fails_the_launch_and_deletes_the_instances(make, gce, monkeypatch):
    monkeypatch.setattr(vm_base, "SSH_POLL_S", 0.05)
    provider = make(ssh_wait_s=0.2)   # the recorded natIP is rewritten to 127.0.0.1, where no sshd listens
    plan, token = _launch(provider, nodes=2)
    with pytest.raises(ProviderError, match="SSH did not answer") as err:
        provider.launch(plan)
    assert "firewall" in err.value.hint and "\n" not in str(err.value)
    assert gce.live() == [] and sorted(gce.deleted) == [f"foundry-{token}-0", f"foundry-{token}-1"]
    record = provider.ledger.get(token)
    assert record["state"] == "terminated" and record["names"] == gce.deleted


@pytest.mark.parametrize("knob, says", [
    ({"insert_error": "error_quota_exceeded.json"}, "Quota 'NVIDIA_T4_GPUS' exceeded"),
    ({"operation_error": "operation_zone_exhausted.json"}, "ZONE_RESOURCE_POOL_EXHAUSTED"),
])
def test_no_capacity_or_quota_is_one_retry_eligible_line_and_leaves_nothing(make, gce, knob, says):
    for key, value in knob.items():
        setattr(gce, key, value)
    provider = make()
    plan, token = _launch(provider, nodes=2)
    with pytest.raises(NoCapacityError) as err:
        provider.launch(plan)
    assert says in err.value.message and "\n" not in str(err.value)
    assert err.value.retry_eligible is True and err.value.exit_code == 1
    assert gce.live() == [] and provider.ledger.get(token)["state"] == "terminated"


def test_reclaim_deletes_what_a_dead_launch_made_found_by_its_label(make, gce):
    provider = make()
    plan, token = _launch(provider, nodes=2)
    names = provider.names(plan.request, token)
    provider.ledger.write(token, state="intent", names=names)    # the launcher died right after the inserts
    provider.create(plan.request, token, names, provider.public)
    assert gce.live() == names
    assert make().reclaim(provider.launch_intent(plan)) is None
    assert gce.live() == [] and make().ledger.get(token)["state"] == "terminated"


def test_status_of_a_job_whose_instance_gce_deleted_is_lost(make, gce):
    provider = make(spot=True)
    plan, token = _launch(provider)
    [name] = provider.create(plan.request, token, provider.names(plan.request, token), provider.public)
    with gce.lock:
        del gce.instances[name]   # preempted: instanceTerminationAction DELETE
    handle = SimpleNamespace(data={"instance_ids": [name], "token": token, "hosts": ["127.0.0.1"]})
    status = provider.status(handle)
    assert status.state.value == "lost" and name in status.reason


@pytest.mark.parametrize("options, says", [
    ({"zone": "us-central1-a", "machine_type": "e2-small"}, "needs a project"),
    ({"project": "my-project", "machine_type": "e2-small"}, "needs a zone"),
    ({"project": "my-project", "zone": "us-central1"}, "is not a GCE zone"),
    ({"project": "My Project", "zone": "us-central1-a"}, "is not a GCP project id"),
    ({"project": "my-project", "zone": "us-central1-a"}, "needs a machine type"),
    ({"project": "my-project", "zone": "us-central1-a", "gpus": 3}, "no machine type in the catalogue"),
    ({"project": "my-project", "zone": "us-central1-a", "machine_type": "e2-small", "spot": "yes"}, "spot must be"),
    ({"project": "my-project", "zone": "us-central1-a", "machine_type": "e2-small", "region": "x"}, "unknown option"),
    ({"project": "my-project", "zone": "us-central1-a", "machine_type": "e2-small", "ssh_user": "Root!"}, "ssh_user"),
])
def test_bad_options_are_refused_in_one_line(options, says):
    with pytest.raises(ConfigError, match=says):
        GceConfig.from_dict(options)


def test_create_cluster_forms_and_a_bad_option_exit_2(cli, tmp_path):
    key = tmp_path / "id_ed25519"
    key.write_bytes(ssh_key()[0])
    assert cli("create", "secret", "ssh", "gce-key", "--private-key", str(key))[0] == 0
    code, out, err = cli("create", "cluster", "g", "--provider", "gce", "-o", "project=my-project",
                         "-o", "zone=us-central1-a", "-o", "machine_type=g2-standard-8", "-o", "secret=gce-key",
                         "-o", "spot=true", "-o", "disk_size_gb=200")
    assert code == 0, out + err
    code, out, err = cli("create", "cluster", "g2", "--provider", "gce", "-o", "project=my-project",
                         "-o", "zone=us-central1-a", "-o", "gpus=1", "-o", "gpu_type=a100", "-o", "secret=gce-key")
    assert code == 0, out + err
    code, out, err = cli("create", "cluster", "g3", "--provider", "gce", "-o", "project=my-project",
                         "-o", "machine_type=e2-small")
    assert code == 2 and (out + err).strip().splitlines()[0] == "error: gce cluster 'g3' needs a zone"


def test_credentials_that_are_not_a_service_account_key_say_so(make):
    provider = make()
    provider._credentials = SimpleNamespace(files={"/foundry/secrets/gcp/credentials.json": json.dumps({"x": 1}).encode()})
    with pytest.raises(Exception, match="not a service-account key"):
        provider.credentials()


def test_without_the_sdk_the_plan_says_which_extra_to_install(make, monkeypatch):
    import sys

    import google.cloud

    monkeypatch.setitem(sys.modules, "google.cloud.compute_v1", None)   # import fails as if not installed
    monkeypatch.delattr(google.cloud, "compute_v1")
    with pytest.raises(ConfigError, match="needs its cloud's SDK") as err:
        make().dryrun(JobRequest("gpt", "r", 0, ["train.py"]))
    assert "foundry-anywhere[gcp]" in err.value.hint


def test_application_default_credentials_are_used_without_a_secret(make, gce, tmp_path, monkeypatch):
    sa = tmp_path / "adc.json"
    sa.write_text(service_account(f"{gce.url}/token"))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(sa))   # what ADC reads first
    provider = make(credentials=None)
    provider._credentials = None
    assert provider.instances() == [] and gce.calls == ["GET instances"]
