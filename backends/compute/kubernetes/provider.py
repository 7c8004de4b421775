"""The `kubernetes` compute provider: an Indexed Job + headless Service + Secret per resumption.

Launch order: the Job is created suspended, then the Secret and Service with ownerReferences to it
(so deleting the Job garbage-collects them), then the Job is unsuspended. A graceful stop marks the
Job (annotation) and suspends it: the kubelet sends SIGTERM to each pod's entrypoint, which pauses
the workers once each; a hard stop deletes the Job.
"""

from __future__ import annotations

import dataclasses
import secrets as _secrets
import time
from typing import Any, Iterator

import yaml

from foundry.plugins.compute import PAUSED_EXIT_CODE, Capabilities, JobHandle, JobRequest, JobState, JobStatus, Plan
from foundry.plugins.errors import CredentialsError, ProviderError

from .config import KubernetesConfig
from .manifests import LABEL_PREFIX, build_manifests, check_job_rules, dns_name

STOP_ANNOTATION = f"{LABEL_PREFIX}/stop-requested"
LOST_POD_REASONS = {"Evicted", "OOMKilled", "Preempting", "NodeLost", "Shutdown", "Terminated", "NodeShutdown"}


def _exit_code(pod: dict[str, Any]) -> tuple[int | None, str | None]:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        term = (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get("terminated")
        if term:
            return term.get("exitCode"), term.get("reason")
    return None, (pod.get("status") or {}).get("reason")


class KubernetesProvider:
    """One Kubernetes cluster (a kubeconfig context and namespace)."""

    name = "kubernetes"
    capabilities = Capabilities(multi_node=True, gpus=True, preemption_notice=True, graceful_stop=True,
                                images=True, gpu_type_selection=True, instance_selection=True,
                                launch_modes=("per_process", "per_node"))
    config_keys: frozenset[str] = frozenset()   # extra cluster-config keys a subclass accepts
    client_max_age: float | None = None         # rebuild the client (fresh token) after this many seconds

    def __init__(self, cluster_config: dict[str, Any] | None = None):
        raw = dict(cluster_config or {})
        self.raw_config = raw
        self.config = KubernetesConfig.from_dict(raw, extra_keys=self.config_keys)
        # a stop's or a preemption's SIGTERM comes this long before the kill: the trainer's notice window
        self.capabilities = dataclasses.replace(type(self).capabilities,
                                                notice_window_s=float(self.config.termination_grace_seconds))
        self._client = None
        self._client_born = 0.0

    # ---- the client (cloud subclasses override kubeconfig())
    def kubeconfig(self) -> str | dict[str, Any] | None:
        """A kubeconfig path or dict; None means $KUBECONFIG / ~/.kube/config."""
        return self.config.kubeconfig

    @property
    def client(self):
        expired = self.client_max_age is not None and time.monotonic() - self._client_born > self.client_max_age
        if self._client is None or expired:
            from .client import KubeClient

            self._client = KubeClient(self.kubeconfig(), self.config.context)
            self._client_born = time.monotonic()
        return self._client

    # ---- planning
    def dryrun(self, request: JobRequest) -> Plan:
        name = dns_name(request.run_name, request.resumption, _secrets.token_hex(3))
        docs = build_manifests(request, self.config, name, reveal=False)
        check_job_rules(docs[-1])
        summary = (f"Indexed Job {self.config.namespace}/{name}: {request.nodes} pod(s) x "
                   f"{request.procs_per_node} process(es)"
                   f"{f', {request.gpus_per_node} GPU(s)/pod' if request.gpus_per_node else ''}"
                   f"{f' on context {self.config.context}' if self.config.context else ''}")
        planned = dataclasses.replace(request, extra={**request.extra, "kubernetes_name": name})
        return Plan(provider=self.name, request=planned, summary=summary,
                    artifacts={"manifests.yaml": yaml.safe_dump_all(docs, sort_keys=False)})

    def launch(self, plan: Plan) -> JobHandle:
        request = plan.request
        name = request.extra.get("kubernetes_name")
        if not name:
            raise ProviderError("kubernetes: this plan was not made by a kubernetes provider's dryrun")
        docs = build_manifests(request, self.config, name, reveal=True)
        job_doc = docs[-1]
        check_job_rules(job_doc)
        ns = self.config.namespace
        job = self.client.create(job_doc)     # suspended until its Secret and Service exist
        owner = [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": job["metadata"]["uid"],
                  "controller": False, "blockOwnerDeletion": False}]
        for doc in docs[:-1]:
            doc["metadata"]["ownerReferences"] = owner
            self.client.create(doc)
        self.client.patch_job(ns, name, {"spec": {"suspend": False}})
        return JobHandle(provider=self.name, cluster=self.config.name, job_id=name,
                         data={"namespace": ns, "nodes": request.nodes, "procs_per_node": request.procs_per_node,
                               "run_name": request.run_name, "run_id": request.run_id,
                               "resumption": request.resumption})

    # ---- observing
    def _pods(self, handle: JobHandle) -> list[dict[str, Any]]:
        return self.client.list_pods(handle.data.get("namespace", self.config.namespace),
                                     f"{LABEL_PREFIX}/job={handle.job_id}")

    def status(self, handle: JobHandle) -> JobStatus:
        ns = handle.data.get("namespace", self.config.namespace)
        nodes = handle.data.get("nodes")
        job = self.client.get_job(ns, handle.job_id)
        if job is None:
            return JobStatus(JobState.LOST, reason="the Job no longer exists (deleted)", nodes=nodes)
        st = job.get("status") or {}
        conds = {c["type"]: c for c in st.get("conditions") or [] if c.get("status") == "True"}
        stop = ((job.get("metadata") or {}).get("annotations") or {}).get(STOP_ANNOTATION)
        if "Complete" in conds:
            return JobStatus(JobState.COMPLETED, exit_code=0, nodes=nodes)
        failed = conds.get("Failed") or conds.get("FailureTarget")
        if failed:
            pods = self._pods(handle)
            codes = [_exit_code(p) for p in pods]
            nonzero = [c for c in codes if c[0] not in (None, 0, 143)]
            code, why = nonzero[0] if nonzero else (None, None)
            message = failed.get("message") or ""
            if code == PAUSED_EXIT_CODE or (failed.get("reason") == "PodFailurePolicy" and f" {PAUSED_EXIT_CODE} " in f" {message} "):
                return JobStatus(JobState.PAUSED, exit_code=PAUSED_EXIT_CODE, reason="paused after a checkpoint", nodes=nodes)
            pod_reasons = {c[1] for c in codes} | {(p.get("status") or {}).get("reason") for p in pods}
            if failed.get("reason") == "DeadlineExceeded" or pod_reasons & LOST_POD_REASONS:
                return JobStatus(JobState.LOST, exit_code=code, reason=f"{failed.get('reason')}: {message}".strip(": "), nodes=nodes)
            return JobStatus(JobState.FAILED, exit_code=code, reason=failed.get("reason") or why, nodes=nodes)
        active = st.get("active") or 0
        if stop:
            if "Suspended" in conds and not active:
                return JobStatus(JobState.PAUSED, exit_code=PAUSED_EXIT_CODE, reason="stopped: pods terminated", nodes=nodes)
            return JobStatus(JobState.STOPPING, nodes=nodes)
        if active and any((p.get("status") or {}).get("phase") == "Running" for p in self._pods(handle)):
            return JobStatus(JobState.RUNNING, nodes=nodes)
        return JobStatus(JobState.PENDING, reason="Suspended" if "Suspended" in conds else None, nodes=nodes)

    def logs(self, handle: JobHandle, follow: bool = False, rank: int | None = None) -> Iterator[str]:
        """The log of the pod running `rank` (pod index = rank // procs_per_node; pod 0 by default)."""
        index = 0 if rank is None else rank // max(1, int(handle.data.get("procs_per_node") or 1))
        ns = handle.data.get("namespace", self.config.namespace)
        label = "batch.kubernetes.io/job-completion-index"
        while True:
            pods = [p for p in self._pods(handle)
                    if ((p.get("metadata") or {}).get("labels") or {}).get(label) == str(index)
                    and (p.get("status") or {}).get("phase") != "Pending"]
            if pods or not follow or self.status(handle).state.terminal:
                break
            time.sleep(1.0)   # following a job whose pod has not started yet
        if not pods:
            return iter(())
        return self.client.pod_log(ns, pods[0]["metadata"]["name"], follow)

    # ---- stopping
    def stop(self, handle: JobHandle, graceful: bool = True) -> None:
        ns = handle.data.get("namespace", self.config.namespace)
        if graceful:
            if self.client.get_job(ns, handle.job_id) is None:
                return
            self.client.patch_job(ns, handle.job_id, {"metadata": {"annotations": {STOP_ANNOTATION: "graceful"}},
                                                      "spec": {"suspend": True}})
            return
        self.client.delete("Job", ns, handle.job_id)
        for kind in ("Service", "Secret"):  # owned by the Job; deleted here too for clusters without GC
            self.client.delete(kind, ns, handle.job_id)

    def list(self) -> list[JobHandle]:
        handles = []
        for job in self.client.list_jobs(self.config.namespace, "app.kubernetes.io/managed-by=foundry"):
            meta = job["metadata"]
            lab = meta.get("labels") or {}
            spec = job.get("spec") or {}
            handles.append(JobHandle(provider=self.name, cluster=self.config.name, job_id=meta["name"], data={
                "namespace": meta.get("namespace", self.config.namespace), "nodes": spec.get("completions"),
                "procs_per_node": int((meta.get("annotations") or {}).get(f"{LABEL_PREFIX}/procs-per-node", 1)),
                "run_name": lab.get(f"{LABEL_PREFIX}/run-name"), "run_id": lab.get(f"{LABEL_PREFIX}/run-id"),
                "resumption": int(lab.get(f"{LABEL_PREFIX}/resumption", 0))}))
        return handles

    def describe(self) -> dict[str, Any]:
        try:
            listed = self.client.list_nodes()
        except CredentialsError:
            # namespace-scoped credentials may not list nodes: reachability is all we can show
            self.client.list_jobs(self.config.namespace, "app.kubernetes.io/managed-by=foundry")
            return {"provider": self.name, "nodes": None, "devices": None, "state": "ready",
                    "namespace": self.config.namespace, "note": "no permission to list nodes"}
        nodes = []
        for node in listed:
            cap = (node.get("status") or {}).get("capacity") or {}
            ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in (node.get("status") or {}).get("conditions") or [])
            cpu = str(cap.get("cpu", "0"))
            nodes.append({"name": node["metadata"]["name"], "cpus": int(cpu) if cpu.isdigit() else 0,
                          "gpus": int(cap.get(self.config.gpu_resource, 0) or 0), "state": "ready" if ready else "not ready"})
        gpus = sum(n["gpus"] for n in nodes)
        cpus = sum(n["cpus"] for n in nodes)
        return {"provider": self.name, "nodes": len(nodes), "cpus": cpus, "gpus": gpus, "devices": gpus or cpus,
                "state": "ready" if any(n["state"] == "ready" for n in nodes) else "no ready nodes",
                "namespace": self.config.namespace, "node_list": nodes}
