"""Generated Kubernetes manifests, validated against the official Kubernetes 1.31 OpenAPI schema
(kubernetes-validate, strict: unknown fields and bad enum values fail), plus the API server's
own Job rules that the schema cannot express. No API server runs here."""

from __future__ import annotations

import kubernetes_validate
import pytest
import yaml

from foundry.backends.compute.kubernetes import KubernetesProvider
from foundry.backends.compute.kubernetes.config import KubernetesConfig
from foundry.backends.compute.kubernetes.manifests import build_manifests, check_job_rules, dns_name
from foundry.plugins.compute import ComputeProvider, JobRequest, SecretMount
from foundry.plugins.errors import ConfigError

K8S_VERSION = "1.31.0"


def _request(**kw) -> JobRequest:
    base = dict(run_name="Tiny_GPT", run_id="run-7", resumption=3, command=["train.py", "--steps", "10"],
                nodes=2, procs_per_node=4, gpus_per_node=4, gpu_type="NVIDIA-H100-80GB-HBM3", image="ghcr.io/acme/train:1",
                env={"PLAIN": "x", "AWS_SECRET_ACCESS_KEY": "hunter2"}, extra={"secret_env": ["AWS_SECRET_ACCESS_KEY"]},
                secret_files=[SecretMount("/var/secrets/gcp.json", b'{"k": 1}', mode=0o400)])
    base.update(kw)
    return JobRequest(**base)


def _docs(request=None, **cfg):
    return build_manifests(request or _request(), KubernetesConfig(**cfg), "tiny-gpt-r3-abc123", reveal=True)


@pytest.mark.parametrize("cfg", [{}, {"restart_policy": "OnFailure", "backoff_limit": 2, "cpu": "8", "memory": "32Gi",
                                      "service_account": "trainer", "node_selector": {"pool": "gpu"},
                                      "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                                      "image_pull_secrets": ["regcred"], "ttl_seconds_after_finished": None}])
def test_every_manifest_passes_strict_schema_validation(cfg):
    docs = _docs(**cfg)
    assert [d["kind"] for d in docs] == ["Secret", "Service", "Job"]
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    check_job_rules(docs[-1])


def test_cpu_only_request_without_secrets_validates():
    docs = _docs(_request(gpus_per_node=0, gpu_type=None, secret_files=[], env={}, extra={}))
    assert [d["kind"] for d in docs] == ["Service", "Job"]
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    container = docs[-1]["spec"]["template"]["spec"]["containers"][0]
    assert "resources" not in container


def test_indexed_job_with_rendezvous_through_the_headless_service():
    secret, service, job = _docs()
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == 2
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == service["metadata"]["name"] == "tiny-gpt-r3-abc123"
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == {"foundry.dev/job": "tiny-gpt-r3-abc123"}
    script = pod["containers"][0]["command"][2]
    assert "--rdzv_endpoint=tiny-gpt-r3-abc123-0.tiny-gpt-r3-abc123:29500" in script
    assert "--nnodes=2" in script and "--nproc_per_node=4" in script and "--rdzv_backend=c10d" in script
    assert pod["containers"][0]["command"][-3:] == ["train.py", "--steps", "10"]
    labels = job["metadata"]["labels"]
    assert labels["foundry.dev/run-name"] == "Tiny_GPT" and labels["foundry.dev/resumption"] == "3"
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 4
    assert pod["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"


def test_secrets_travel_as_a_secret_never_inline():
    secret, _, job = _docs()
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"] == {"name": secret["metadata"]["name"], "key": "AWS_SECRET_ACCESS_KEY"}
    assert env["PLAIN"]["value"] == "x" and env["RUN_ID"]["value"] == "run-7" and env["RESUMPTION_INDEX"]["value"] == "3"
    assert "hunter2" not in yaml.safe_dump(job)
    assert secret["stringData"]["AWS_SECRET_ACCESS_KEY"] == "hunter2"
    volume = next(v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == "foundry-secrets")
    assert volume["secret"]["defaultMode"] == 0o400 and volume["secret"]["items"][0]["mode"] == 0o400
    mount = next(m for m in container["volumeMounts"] if m["name"] == "foundry-secrets")
    assert mount == {"name": "foundry-secrets", "mountPath": "/var/secrets/gcp.json", "subPath": "file-0", "readOnly": True}


def test_dryrun_masks_secret_values_and_has_no_side_effects():
    provider = KubernetesProvider({"namespace": "ml", "context": "nowhere"})
    assert isinstance(provider, ComputeProvider)
    plan = provider.dryrun(_request())
    text = plan.artifacts["manifests.yaml"]
    assert "hunter2" not in text and '{"k": 1}' not in text and "'***'" in text
    docs = list(yaml.safe_load_all(text))
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    assert provider._client is None   # no API call was made


def test_paused_exit_code_fails_the_job_instead_of_retrying():
    rules = _docs()[-1]["spec"]["podFailurePolicy"]["rules"]
    assert rules[0] == {"action": "FailJob", "onExitCodes": {"containerName": "trainer", "operator": "In", "values": [75]}}
    assert "podFailurePolicy" not in _docs(restart_policy="OnFailure")[-1]["spec"]


def test_restart_policy_always_is_refused():
    with pytest.raises(ConfigError, match="restart_policy"):
        KubernetesConfig.from_dict({"restart_policy": "Always"})
    job = _docs()[-1]
    job["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)   # the schema alone accepts it...
    with pytest.raises(ConfigError, match="restartPolicy"):
        check_job_rules(job)                                       # ...the API server would not


def test_schema_rejects_what_a_typo_would_produce():
    job = _docs()[-1]
    job["spec"]["completions"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    job = _docs()[-1]
    job["spec"]["template"]["spec"]["containers"][0]["gpus"] = 4
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, K8S_VERSION, strict=True)


def test_names_are_dns_labels_and_bad_config_is_a_config_error():
    name = dns_name("My Very_Long Run Name " * 4, 12, "abcdef")
    assert len(name) + len("-127") <= 63 and name == name.lower() and name.endswith("-r12-abcdef")
    with pytest.raises(ConfigError):
        KubernetesConfig.from_dict({"colour": "blue"})
    with pytest.raises(ConfigError, match="image"):
        build_manifests(_request(image=None), KubernetesConfig(), "x")
