"""The oci-vm provider against RECORDED OCI Core Services responses (recorded/oci/) replayed by a
loopback server into the REAL oci SDK clients, every request's HTTP signature verified with the API
key's public half and every LaunchInstance body checked against the SDK's model types
(oci_recorded.check_model). No OCI tenancy is reached: this proves the requests Foundry sends and
how it reads the answers, not that OCI accepts them today (docs/providers.md#oci-vm)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from foundry.backends.compute.oci_vm import OciVmProvider
from foundry.backends.compute.oci_vm.config import OciVmConfig
from foundry.backends.compute.vm import base as vm_base
from foundry.backends.compute.vm.base import NoCapacityError
from foundry.plugins.compute import JobRequest
from foundry.plugins.errors import ConfigError, CredentialsError, ProviderError

from support.oci_recorded import COMPARTMENT, IMAGE, OCI_CONFIG, RECORDED, SUBNET, RecordedOCI, check_model
from support.vm_keys import rsa_key, ssh_key



@pytest.fixture
def api():
    server = RecordedOCI(public_key_pem=rsa_key()[1]).start()
    yield server
    server.stop()


@pytest.fixture
def make(api, tmp_path):
    private, public = ssh_key()

    def provider(**options) -> OciVmProvider:
        raw = {"name": "o", "compartment": COMPARTMENT, "availability_domain": "Uocm:US-ASHBURN-AD-1",
               "shape": "VM.GPU.A10.1", "image": IMAGE, "subnet": SUBNET, "endpoint": api.url, "secret": "oci-key",
               "credentials": "oci", "state_dir": str(tmp_path / "state"), **options,
               "secret_injection": SimpleNamespace(files={"/foundry/secrets/oci-key/id_key": private}),
               "credentials_injection": SimpleNamespace(files={
                   "/foundry/secrets/oci/config": OCI_CONFIG.encode(),
                   "/foundry/secrets/oci/key.pem": rsa_key()[0].encode()})}
        p = OciVmProvider({k: v for k, v in raw.items() if v is not None})
        p.public = public
        return p

    return provider


def _create(provider: OciVmProvider, run: str = "gpt", nodes: int = 1):
    plan = provider.dryrun(JobRequest(run, "run-id-1", 0, ["train.py"], nodes=nodes))
    token = plan.request.extra["vm_token"]
    ids = provider.create(plan.request, token, provider.names(plan.request, token), provider.public)
    return plan, token, ids


def test_recorded_bodies_fit_the_sdk_models():
    check_model(json.loads((RECORDED / "instance.json").read_text()), "Instance")
    check_model(json.loads((RECORDED / "vnic.json").read_text()), "Vnic")
    check_model(json.loads((RECORDED / "vnic_attachment.json").read_text()), "VnicAttachment")
    with pytest.raises(AssertionError, match="not a field"):
        check_model({"shape": "x", "zone": "y"}, "LaunchInstanceDetails")


def test_create_with_a_shape_tags_ssh_key_boot_volume_and_subnet(make, api):
    provider = make(boot_volume_gb=200, assign_public_ip=False)
    plan, token, ids = _create(provider, run="My.Run_X", nodes=2)
    assert api.live() == [f"foundry-{token}-0", f"foundry-{token}-1"] and len(ids) == 2
    body = api.launches[0]
    assert body["shape"] == "VM.GPU.A10.1" and body["compartmentId"] == COMPARTMENT
    assert body["availabilityDomain"] == "Uocm:US-ASHBURN-AD-1" and body["displayName"] == f"foundry-{token}-0"
    assert body["freeformTags"] == {"foundry-token": token, "foundry-run": "my-run_x", "foundry-run-id": "run-id-1",
                                    "foundry-resumption": "0", "foundry-cluster": "o"}
    assert body["metadata"] == {"ssh_authorized_keys": provider.public}
    assert body["sourceDetails"] == {"sourceType": "image", "imageId": IMAGE, "bootVolumeSizeInGBs": 200}
    assert body["createVnicDetails"] == {"subnetId": SUBNET, "assignPublicIp": False}
    assert "shapeConfig" not in body and "preemptibleInstanceConfig" not in body
    assert api.retry_tokens == [f"{token}-0", f"{token}-1"]          # a repeated launch is the same request
    assert provider.ledger.get(token)["instance_ids"] == ids          # each id recorded as it came
    [vm0, _] = provider.lookup(ids)
    assert vm0.state == "running" and vm0.address == "127.0.0.1"      # via its VNIC attachment and VNIC


def test_gpus_pick_a_shape_and_a_flex_shape_needs_ocpus(make, api):
    assert make(shape=None, gpus=2, gpu_type="a10").config.shape == "VM.GPU.A10.2"
    flex = make(shape="VM.Standard.E4.Flex", ocpus=4)
    assert flex.config.memory_gb == 64 and flex.price() == pytest.approx(4 * 0.025 + 64 * 0.0015)
    _create(flex)
    assert api.launches[-1]["shapeConfig"] == {"ocpus": 4.0, "memoryInGBs": 64.0}
    [row] = flex.instances()
    assert row["type"] == "VM.Standard.E4.Flex" and row["price_per_hour"] == pytest.approx(flex.price())
    with pytest.raises(ConfigError, match="needs ocpus"):
        make(shape="VM.Standard.E4.Flex")


@pytest.mark.parametrize("flag", ["preemptible", "spot"])
def test_preemptible_or_spot_is_the_preemptible_instance_config(make, api, flag):
    provider = make(**{flag: True})
    plan, token, [iid] = _create(provider)
    assert api.launches[-1]["preemptibleInstanceConfig"] == {
        "preemptionAction": {"type": "TERMINATE", "preserveBootVolume": False}}
    [row] = provider.instances()
    assert row["spot"] is True and row["price_per_hour"] == 1.0 and "(spot)" in plan.summary


def test_list_by_tags_and_clean_terminates_only_this_clusters_leftovers(make, api):
    provider = make()
    _, token, [kept] = _create(provider)
    api.add("foundry-orphan-r0-0000-0", {"foundry-cluster": "o", "foundry-token": "orphan-r0-0000", "foundry-run": "gone"})
    api.add("web-server", {"team": "web"})
    api.add("foundry-other-0", {"foundry-cluster": "other", "foundry-token": "other-r0-1111"})
    rows = {r["run"]: r for r in provider.instances()}
    assert set(rows) == {"gpt", "gone"} and rows["gpt"]["instance"] == kept and rows["gone"]["cost"] >= 0
    [orphan] = provider.clean_instances(keep_tokens={token})
    assert orphan == rows["gone"]["instance"]
    assert api.live() == sorted([f"foundry-{token}-0", "web-server", "foundry-other-0"])


def test_ssh_that_never_answers_fails_the_launch_and_terminates(make, api, monkeypatch):
    monkeypatch.setattr(vm_base, "SSH_POLL_S", 0.05)
    provider = make(ssh_wait_s=0.2)   # the recorded VNIC address is rewritten to 127.0.0.1: no sshd there
    plan = provider.dryrun(JobRequest("gpt", "r", 0, ["train.py"], nodes=2))
    with pytest.raises(ProviderError, match="SSH did not answer"):
        provider.launch(plan)
    assert api.live() == [] and len(api.terminated) == 2
    assert provider.ledger.get(plan.request.extra["vm_token"])["state"] == "terminated"


@pytest.mark.parametrize("error, says", [("error_out_of_capacity.json", "Out of host capacity"),
                                         ("error_limit_exceeded.json", "LimitExceeded")])
def test_no_capacity_or_limit_is_one_retry_eligible_line(make, api, error, says):
    api.launch_error = error
    provider = make()
    plan = provider.dryrun(JobRequest("gpt", "r", 0, ["train.py"]))
    with pytest.raises(NoCapacityError) as err:
        provider.launch(plan)
    assert says in err.value.message and "\n" not in str(err.value) and err.value.retry_eligible is True
    assert api.live() == [] and provider.ledger.get(plan.request.extra["vm_token"])["state"] == "terminated"


def test_a_second_instance_out_of_capacity_terminates_the_first(make, api):
    provider = make()
    plan = provider.dryrun(JobRequest("gpt", "r", 0, ["train.py"], nodes=2))
    real_launch = provider.clients[0].launch_instance

    def second_fails(details, **kw):
        if api.launches:
            api.launch_error = "error_out_of_capacity.json"
        return real_launch(details, **kw)

    provider.clients[0].launch_instance = second_fails
    with pytest.raises(NoCapacityError):
        provider.launch(plan)
    assert len(api.launches) == 1 and api.live() == [] and len(api.terminated) == 1


def test_reclaim_terminates_what_a_dead_launch_made_found_by_its_tag(make, api):
    provider = make()
    plan, token, ids = _create(provider, nodes=2)
    provider.ledger.write(token, state="intent", instance_ids=[])   # died before the ids were recorded
    assert make().reclaim(provider.launch_intent(plan)) is None
    assert api.live() == [] and sorted(make().ledger.get(token)["instance_ids"]) == sorted(ids)


def test_status_of_a_job_whose_instance_oci_preempted_is_lost(make, api):
    provider = make(preemptible=True)
    _, token, [iid] = _create(provider)
    api.set_state(f"foundry-{token}-0", "TERMINATED")   # preempted: the action is TERMINATE
    status = provider.status(SimpleNamespace(data={"instance_ids": [iid], "token": token, "hosts": ["127.0.0.1"]}))
    assert status.state.value == "lost" and iid in status.reason


def test_a_wrong_key_is_refused_by_the_signature_check(make, api):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    other = rsa.generate_private_key(public_exponent=65537, key_size=1024).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    provider = make()
    provider._credentials = SimpleNamespace(files={"/foundry/secrets/oci/config": OCI_CONFIG.encode(),
                                                   "/foundry/secrets/oci/key.pem": other})
    with pytest.raises(CredentialsError, match="NotAuthenticated"):
        provider.instances()


@pytest.mark.parametrize("options, says", [
    ({"availability_domain": "AD-1", "subnet": SUBNET, "shape": "VM.GPU.A10.1"}, "needs a compartment"),
    ({"compartment": "my-compartment"}, "is not an OCID"),
    ({"compartment": COMPARTMENT, "subnet": SUBNET, "shape": "VM.GPU.A10.1"}, "needs an availability_domain"),
    ({"compartment": COMPARTMENT, "availability_domain": "AD-1", "shape": "VM.GPU.A10.1"}, "needs a subnet"),
    ({"compartment": COMPARTMENT, "availability_domain": "AD-1", "subnet": SUBNET}, "needs a shape"),
    ({"compartment": COMPARTMENT, "availability_domain": "AD-1", "subnet": SUBNET, "gpus": 3}, "no shape in the catalogue"),
    ({"compartment": COMPARTMENT, "availability_domain": "AD-1", "subnet": SUBNET, "shape": "VM.GPU.A10.1",
      "ocpus": 2}, "for flexible shapes"),
    ({"compartment": COMPARTMENT, "availability_domain": "AD-1", "subnet": SUBNET, "shape": "VM.GPU.A10.1",
      "preemptible": "yes"}, "preemptible must be"),
    ({"compartment": COMPARTMENT, "availability_domain": "AD-1", "subnet": SUBNET, "shape": "VM.GPU.A10.1",
      "zone": "x"}, "unknown option"),
])
def test_bad_options_are_refused_in_one_line(options, says):
    with pytest.raises(ConfigError, match=says):
        OciVmConfig.from_dict(options)


def test_no_image_is_refused_before_anything_is_made(make, api):
    with pytest.raises(ConfigError, match="has no image"):
        make(image=None).dryrun(JobRequest("gpt", "r", 0, ["train.py"]))
    assert api.calls == []


def test_create_cluster_forms_and_a_bad_option_exit_2(cli, tmp_path):
    key = tmp_path / "id_ed25519"
    key.write_bytes(ssh_key()[0])
    assert cli("create", "secret", "ssh", "oci-key", "--private-key", str(key))[0] == 0
    code, out, err = cli("create", "cluster", "o", "--provider", "oci-vm", "-o", f"compartment={COMPARTMENT}",
                         "-o", "availability_domain=Uocm:US-ASHBURN-AD-1", "-o", "shape=VM.GPU.A10.1",
                         "-o", f"image={IMAGE}", "-o", f"subnet={SUBNET}", "-o", "preemptible=true",
                         "-o", "secret=oci-key")
    assert code == 0, out + err
    code, out, err = cli("create", "cluster", "o2", "--provider", "oci-vm", "-o", f"compartment={COMPARTMENT}",
                         "-o", "availability_domain=Uocm:US-ASHBURN-AD-1", "-o", "shape=VM.Standard.E4.Flex",
                         "-o", f"subnet={SUBNET}", "-o", "secret=oci-key")
    assert code == 2 and (out + err).strip().splitlines()[0].endswith("needs ocpus (memory_gb: default 16 per OCPU)")


def test_the_oci_config_file_is_used_without_a_secret(make, api, tmp_path, monkeypatch):
    key = tmp_path / "key.pem"
    key.write_text(rsa_key()[0])
    config = tmp_path / "config"
    config.write_text(OCI_CONFIG.replace("/foundry/secrets/oci/key.pem", str(key)))
    monkeypatch.setenv("OCI_CONFIG_FILE", str(config))   # as the oci CLI reads it; default ~/.oci/config
    provider = make(credentials=None)
    provider._credentials = None
    assert provider.instances() == [] and api.calls == ["GET instances"]
