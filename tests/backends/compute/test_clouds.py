"""EKS / GKE / OKE providers, tested with RECORDED responses (tests/backends/compute/recorded/):
the real boto3 EKS client answered by botocore's Stubber, the GKE Container API's Cluster JSON,
OKE's create_kubeconfig text. The EKS kubeconfig then drives the kubernetes provider against the
FAKE loopback API server. No cloud is reached."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qs, urlparse

import boto3
import pytest
from botocore.stub import Stubber

from foundry.backends.clouds.aws.eks import TOKEN_PREFIX, EKSProvider
from foundry.backends.clouds.gcp.gke import GKEProvider
from foundry.backends.clouds.oci.oke import OKEProvider
from foundry.plugins.compute import JobRequest, JobState
from foundry.plugins.errors import ConfigError, CredentialsError, ProviderError

from .k8s_fake import FakeKubeAPI

RECORDED = Path(__file__).with_name("recorded")


def _recorded(name: str):
    return json.loads((RECORDED / name).read_text())


class _RecordedEKS(EKSProvider):
    """EKS with static test credentials and the describe_cluster answer replayed by Stubber."""

    describe = _recorded("eks_describe_cluster.json")
    error: str | None = None

    def session(self):
        return boto3.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret-example",
                             region_name=self.raw_config["region"])

    def eks_client(self, session):
        client = session.client("eks", region_name=self.raw_config["region"])
        stub = Stubber(client)
        if self.error:
            stub.add_client_error("describe_cluster", service_error_code=self.error, http_status_code=403)
        else:
            stub.add_response("describe_cluster", self.describe, {"name": self.raw_config["cluster_name"]})
        stub.activate()
        return client


EKS_CONFIG = {"cluster_name": "training", "region": "us-west-2", "namespace": "ml", "image": "img:1"}


def test_eks_kubeconfig_from_recorded_describe_cluster_and_a_presigned_sts_token():
    kc = _RecordedEKS(EKS_CONFIG).kubeconfig()
    cluster = kc["clusters"][0]["cluster"]
    assert cluster["server"] == _RecordedEKS.describe["cluster"]["endpoint"]
    assert cluster["certificate-authority-data"] == _RecordedEKS.describe["cluster"]["certificateAuthority"]["data"]
    token = kc["users"][0]["user"]["token"]
    assert token.startswith(TOKEN_PREFIX)
    encoded = token[len(TOKEN_PREFIX):]
    url = urlparse(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode())
    query = parse_qs(url.query)
    assert url.netloc == "sts.us-west-2.amazonaws.com"
    assert query["Action"] == ["GetCallerIdentity"] and query["X-Amz-Expires"] == ["60"]
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"][0] and query["X-Amz-Signature"]
    assert query["X-Amz-Credential"][0].startswith("AKIDEXAMPLE/")


@pytest.mark.parametrize("code,error", [("AccessDeniedException", CredentialsError), ("ResourceNotFoundException", ConfigError)])
def test_eks_errors_say_what_is_wrong(code, error):
    provider = _RecordedEKS(EKS_CONFIG)
    provider.error = code
    with pytest.raises(error):
        provider.kubeconfig()


def test_eks_drives_the_kubernetes_provider_through_its_kubeconfig():
    """The recorded cluster's endpoint is pointed at the FAKE API server, which accepts the EKS token."""
    fake = FakeKubeAPI().start()
    try:
        provider = _RecordedEKS(EKS_CONFIG)
        provider.describe = copy.deepcopy(_RecordedEKS.describe)
        provider.describe["cluster"]["endpoint"] = fake.url
        kubeconfig = provider.kubeconfig()
        fake.token = kubeconfig["users"][0]["user"]["token"]   # the fake accepts this EKS token only
        provider.kubeconfig = lambda: kubeconfig
        handle = provider.launch(provider.dryrun(JobRequest("gpt", "r1", 0, ["train.py"], nodes=2)))
        assert handle.provider == "eks" and fake.get("jobs", "ml", handle.job_id)["spec"]["completions"] == 2
        assert provider.status(handle).state == JobState.PENDING
    finally:
        fake.stop()


def test_eks_needs_its_cluster_name():
    with pytest.raises(ConfigError, match="cluster_name"):
        EKSProvider({"region": "us-west-2"})


class _RecordedGKE(GKEProvider):
    """GKE with a stand-in for Application Default Credentials and the Container API replayed."""

    status_code = 200

    def credentials(self):
        return SimpleNamespace(token="ya29.recorded-access-token", valid=True)

    def session(self, creds):
        body = _recorded("gke_cluster.json")
        outer = self

        class _Session:
            def get(self, url, timeout=None):
                assert url == outer.cluster_url()
                return SimpleNamespace(status_code=outer.status_code, json=lambda: body)

        return _Session()


GKE_CONFIG = {"project": "my-project", "location": "us-central1", "cluster_name": "training", "image": "img:1"}


def test_gke_kubeconfig_from_the_recorded_container_api_cluster():
    provider = _RecordedGKE(GKE_CONFIG)
    assert provider.cluster_url() == "https://container.googleapis.com/v1/projects/my-project/locations/us-central1/clusters/training"
    kc = provider.kubeconfig()
    assert kc["clusters"][0]["cluster"]["server"] == "https://34.123.45.67"
    assert kc["clusters"][0]["cluster"]["certificate-authority-data"].startswith("LS0tLS1CRUdJTi")
    assert kc["users"][0]["user"]["token"] == "ya29.recorded-access-token"


@pytest.mark.parametrize("code,error", [(403, CredentialsError), (404, ConfigError), (500, ProviderError)])
def test_gke_errors(code, error):
    provider = _RecordedGKE(GKE_CONFIG)
    provider.status_code = code
    with pytest.raises(error):
        provider.kubeconfig()


class _RecordedOKE(OKEProvider):
    def fetch_kubeconfig_text(self) -> str:
        return _recorded("oke_create_kubeconfig.json")["text"]


def test_oke_kubeconfig_is_the_recorded_create_kubeconfig_answer():
    provider = _RecordedOKE({"cluster_id": "ocid1.cluster.oc1.iad.aaaaaaaaexampleclusterid", "image": "img:1"})
    kc = provider.kubeconfig()
    assert kc["clusters"][0]["cluster"]["server"] == "https://129.213.10.20:6443"
    assert kc["users"][0]["user"]["exec"]["args"][:3] == ["ce", "cluster", "generate-token"]
    assert kc["current-context"] == "context-c4xyz"
    plan = provider.dryrun(JobRequest("gpt", "r1", 0, ["train.py"]))
    assert plan.provider == "oke" and "kind: Job" in plan.artifacts["manifests.yaml"]


def test_oke_refuses_bad_config_and_bad_answers():
    with pytest.raises(ConfigError, match="cluster_id"):
        OKEProvider({"cluster_id": "not-an-ocid"})
    from foundry.backends.clouds.oci.oke import oke_kubeconfig

    with pytest.raises(ProviderError):
        oke_kubeconfig("just: text")
