"""ec2: EC2's "no capacity now" answers are NoCapacityError (retry-eligible: the launcher records the
resumption lost, so the watchdog retries or fails it over), as gce's and oci-vm's are. The real
boto3 client answered by botocore's Stubber (moto cannot be made to run out of capacity)."""

from __future__ import annotations

from types import SimpleNamespace

import boto3
import pytest
from botocore.stub import ANY, Stubber

from foundry.backends.compute.ec2 import Ec2Provider
from foundry.backends.compute.vm.base import NoCapacityError
from foundry.plugins.compute import JobRequest

from support.vm_keys import ssh_key


@pytest.mark.parametrize("code", ["InsufficientInstanceCapacity", "VcpuLimitExceeded"])
def test_no_capacity_is_one_retry_eligible_line_and_the_launch_is_swept(tmp_path, code):
    provider = Ec2Provider({"name": "aws", "region": "us-east-1", "instance_type": "g5.xlarge", "image": "ami-12345678",
                            "secret": "k", "state_dir": str(tmp_path),
                            "secret_injection": SimpleNamespace(files={"/foundry/secrets/k/id_key": ssh_key()[0]})})
    client = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    stub = Stubber(client)
    stub.add_client_error("run_instances", service_error_code=code, http_status_code=500,
                          service_message="We currently do not have sufficient g5.xlarge capacity in the "
                                          "Availability Zone you requested (us-east-1a).")
    stub.add_response("describe_instances", {"Reservations": []}, {"Filters": ANY})
    stub.activate()
    provider._client = client
    plan = provider.dryrun(JobRequest("gpt", "r", 0, ["train.py"]))
    with pytest.raises(NoCapacityError) as err:
        provider.launch(plan)
    assert err.value.message.startswith(f"ec2: no capacity: {code}: ") and "\n" not in str(err.value)
    assert err.value.retry_eligible is True
    assert provider.ledger.get(plan.request.extra["ec2_token"])["state"] == "terminated"
    stub.assert_no_pending_responses()
