"""Pure construction of a run's Kubernetes objects: an Indexed Job (one pod per node), a headless
Service giving pod 0 a stable DNS name for torchrun's c10d rendezvous, and a Secret holding the
job's secret environment and files. No client, no I/O: `dryrun` shows these as YAML.

Inside each pod, PID 1 is a small bash entrypoint: it starts torchrun with a per-rank wrapper
(shared with the Slurm provider) and traps SIGTERM from the kubelet to send exactly one SIGTERM
to every worker, then exits with the workers' code: 75 when they paused after a checkpoint.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from foundry.plugins.compute import PAUSED_EXIT_CODE, JobRequest
from foundry.plugins.errors import ConfigError

from ..slurm.script import exit_code_snippet, render_pause, render_rank_wrapper, setup_snippet
from .config import KubernetesConfig

LABEL_PREFIX = "foundry.dev"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
FOUNDRY_ENV = ("RUN_NAME", "RUN_ID", "RESUMPTION_INDEX")
POD_DIR = "/tmp/foundry"
_DNS_BAD = re.compile(r"[^a-z0-9-]+")
_LABEL_BAD = re.compile(r"[^A-Za-z0-9_.-]+")


def dns_name(run_name: str, resumption: int, token: str) -> str:
    """A DNS-1123 label for the Job/Service/Secret, short enough for `<name>-<index>` pod hostnames."""
    base = _DNS_BAD.sub("-", run_name.lower()).strip("-")[:40].strip("-") or "run"
    return f"{base}-r{resumption}-{token}"


def label_value(value: str) -> str:
    return _LABEL_BAD.sub("-", value)[:63].strip("-_.") or "x"


def labels(request: JobRequest, name: str, cfg: KubernetesConfig) -> dict[str, str]:
    return {**cfg.labels,
            "app.kubernetes.io/managed-by": "foundry",
            f"{LABEL_PREFIX}/job": name,
            f"{LABEL_PREFIX}/run-name": label_value(request.run_name),
            f"{LABEL_PREFIX}/run-id": label_value(request.run_id),
            f"{LABEL_PREFIX}/resumption": str(request.resumption)}


def secret_env_names(request: JobRequest) -> list[str]:
    """Env names that travel in the Secret: `extra['secret_env']` when the control plane names
    them, otherwise every variable except Foundry's own (never leak what might be a secret)."""
    named = request.extra.get("secret_env")
    names = [k for k in request.env if named is None or k in named]
    return sorted(k for k in names if k not in FOUNDRY_ENV)


def entrypoint(request: JobRequest, cfg: KubernetesConfig, rdzv_host: str, rdzv_id: str) -> str:
    worker = list(request.command)
    if not worker:
        raise ConfigError("the run has no command", hint="set `command` in the run spec")
    torchrun = [cfg.python, "-m", "torch.distributed.run", f"--nnodes={request.nodes}",
                f"--nproc_per_node={request.procs_per_node}", "--rdzv_backend=c10d",
                f"--rdzv_endpoint={rdzv_host}:{cfg.rdzv_port}", f"--rdzv_id={rdzv_id}", "--max_restarts=0",
                f"--log-dir={POD_DIR}/torchelastic",  # torchrun's own records beside the pod's, not a temp folder
                "--no-python", "bash", f"{POD_DIR}/rank.sh"]
    if worker[0].endswith(".py"):
        torchrun.append(cfg.python)
    start = f'{shlex.join(torchrun)} "$@" &'
    if request.extra.get("launch") == "per_node":   # mcli: the command runs once per pod and starts its ranks
        ppn = request.procs_per_node
        start = (f"export NODE_RANK=$JOB_COMPLETION_INDEX RANK=$JOB_COMPLETION_INDEX NUM_NODES={request.nodes} "
                 f"LOCAL_WORLD_SIZE={ppn} WORLD_SIZE={request.nodes * ppn} MASTER_ADDR={rdzv_host} "
                 f"MASTER_PORT={cfg.rdzv_port}\n"
                 f'bash "$dir/rank.sh" "$@" &')
    return f"""set -uo pipefail
dir={POD_DIR}; mkdir -p "$dir/ranks" "$dir/logs"
cat > "$dir/rank.sh" <<'FOUNDRY_EOF'
{render_rank_wrapper(POD_DIR).rstrip()}
FOUNDRY_EOF
cat > "$dir/pause.sh" <<'FOUNDRY_EOF'
{render_pause(POD_DIR).rstrip()}
FOUNDRY_EOF
{setup_snippet(request, None)}
foundry_pause() {{ echo "foundry: SIGTERM: pausing the ranks"; touch "$dir/pause_requested"; bash "$dir/pause.sh"; }}
trap foundry_pause TERM
echo "foundry: pod $(hostname) of {request.nodes}, rendezvous {rdzv_host}:{cfg.rdzv_port}"
{start}
pid=$!
while kill -0 "$pid" 2>/dev/null; do wait "$pid"; done
wait "$pid"; rc=$?
{exit_code_snippet('$dir')}
echo "foundry: exit $rc"
exit "$rc"
"""


def build_manifests(request: JobRequest, cfg: KubernetesConfig, name: str, *, reveal: bool = False) -> list[dict[str, Any]]:
    """[Secret?, Service, Job]. With reveal=False (dryrun) secret values are `***`."""
    if request.nodes < 1 or request.procs_per_node < 1:
        raise ConfigError("nodes and processes per node must be at least 1")
    image = request.image or cfg.image
    if not image:
        raise ConfigError("no container image for a kubernetes run",
                          hint="set `image` in the run spec or `image` in the cluster config")
    ns = cfg.namespace
    lab = labels(request, name, cfg)
    def meta() -> dict[str, Any]:
        return {"name": name, "namespace": ns, "labels": dict(lab)}

    secret_names = secret_env_names(request)
    plain = {k: v for k, v in sorted(request.env.items()) if k not in secret_names}
    plain.update({"RUN_NAME": request.run_name, "RUN_ID": request.run_id,
                  "RESUMPTION_INDEX": str(request.resumption), "PYTHONUNBUFFERED": "1"})
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in plain.items()]
    env += [{"name": k, "valueFrom": {"secretKeyRef": {"name": name, "key": k}}} for k in secret_names]
    docs: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    string_data = {k: (request.env[k] if reveal else "***") for k in secret_names}
    items = []
    for i, mount in enumerate(request.secret_files):
        key = f"file-{i}"
        string_data[key] = mount.content.decode("utf-8", errors="replace") if reveal else "***"
        items.append({"key": key, "path": key, "mode": mount.mode & 0o777 or 0o400})
        mounts.append({"name": "foundry-secrets", "mountPath": mount.path, "subPath": key, "readOnly": True})
    if items:
        volumes.append({"name": "foundry-secrets", "secret": {"secretName": name, "items": items, "defaultMode": 0o400}})
    if string_data:
        docs.append({"apiVersion": "v1", "kind": "Secret", "metadata": meta(), "type": "Opaque", "stringData": string_data})
    docs.append({
        "apiVersion": "v1", "kind": "Service", "metadata": meta(),
        "spec": {"clusterIP": "None", "selector": {f"{LABEL_PREFIX}/job": name}, "publishNotReadyAddresses": True,
                 "ports": [{"name": "rdzv", "port": cfg.rdzv_port, "targetPort": cfg.rdzv_port}]},
    })
    resources: dict[str, dict[str, Any]] = {}
    if cfg.cpu:
        resources.setdefault("requests", {})["cpu"] = str(cfg.cpu)
    if cfg.memory:
        resources.setdefault("requests", {})["memory"] = str(cfg.memory)
    node_selector = dict(cfg.node_selector)
    if request.gpus_per_node:
        resources.setdefault("limits", {})[cfg.gpu_resource] = request.gpus_per_node
        volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory"}})
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
        if request.gpu_type:
            node_selector[cfg.gpu_type_label] = request.gpu_type
    if request.instance:   # the well-known label every cloud's nodes carry (EKS, GKE, OKE)
        node_selector[INSTANCE_TYPE_LABEL] = request.instance
    container: dict[str, Any] = {
        "name": "trainer", "image": image,
        "command": ["bash", "-c", entrypoint(request, cfg, f"{name}-0.{name}", f"{request.run_id}-{request.resumption}"),
                    "foundry-entrypoint", *request.command],
        "env": env, "ports": [{"containerPort": cfg.rdzv_port, "name": "rdzv"}],
    }
    if request.workdir:
        container["workingDir"] = request.workdir
    if resources:
        container["resources"] = resources
    if mounts:
        container["volumeMounts"] = mounts
    pod_spec: dict[str, Any] = {
        "restartPolicy": cfg.restart_policy, "subdomain": name, "containers": [container],
        "terminationGracePeriodSeconds": cfg.termination_grace_seconds,
    }
    if volumes:
        pod_spec["volumes"] = volumes
    if node_selector:
        pod_spec["nodeSelector"] = node_selector
    if cfg.tolerations:
        pod_spec["tolerations"] = cfg.tolerations
    if cfg.service_account:
        pod_spec["serviceAccountName"] = cfg.service_account
    if cfg.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": s} for s in cfg.image_pull_secrets]
    job_spec: dict[str, Any] = {
        "completionMode": "Indexed", "completions": request.nodes, "parallelism": request.nodes,
        "backoffLimit": cfg.backoff_limit, "suspend": True,
        "template": {"metadata": {"labels": dict(lab)}, "spec": pod_spec},
    }
    if cfg.restart_policy == "Never":
        # a paused job must not be retried by Kubernetes; a preempted pod does not count as a failure
        job_spec["podFailurePolicy"] = {"rules": [
            {"action": "FailJob", "onExitCodes": {"containerName": "trainer", "operator": "In",
                                                  "values": [PAUSED_EXIT_CODE]}},
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        ]}
    if cfg.ttl_seconds_after_finished is not None:
        job_spec["ttlSecondsAfterFinished"] = cfg.ttl_seconds_after_finished
    docs.append({"apiVersion": "batch/v1", "kind": "Job",
                 "metadata": {**meta(), "annotations": {f"{LABEL_PREFIX}/procs-per-node": str(request.procs_per_node)}},
                 "spec": job_spec})
    return docs


def check_job_rules(job: dict[str, Any]) -> None:
    """The API server's own Job rules that schema validation does not catch."""
    spec = job["spec"]
    policy = spec["template"]["spec"].get("restartPolicy")
    if policy not in ("Never", "OnFailure"):
        raise ConfigError(f"a Job's pods need restartPolicy Never or OnFailure, not {policy!r}")
    if spec.get("podFailurePolicy") and policy != "Never":
        raise ConfigError("podFailurePolicy needs restartPolicy Never")
    if spec.get("completionMode") == "Indexed" and spec.get("completions") is None:
        raise ConfigError("an Indexed Job needs completions")
    if len(job["metadata"]["name"]) > 63:
        raise ConfigError("Job name longer than 63 characters")
