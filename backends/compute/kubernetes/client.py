"""The few Kubernetes API calls the provider makes, through the official client (imported lazily).

Vendor errors become Foundry errors here: 401/403 -> CredentialsError, 404 -> None / NotFound,
409 -> ProviderError("already exists"), anything else -> ProviderError with the API's message.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from foundry.plugins.errors import ConfigError, CredentialsError, ProviderError


def _kubernetes():
    try:
        import kubernetes  # noqa: F401
        from kubernetes import client, config
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError("the kubernetes provider needs the kubernetes package",
                          hint="pip install 'foundry-anywhere[kubernetes]'") from exc
    return client, config


class NotFound(ProviderError):
    pass


class KubeClient:
    """CoreV1 + BatchV1 for one context. `kubeconfig` is a path or an already-built dict."""

    def __init__(self, kubeconfig: str | dict[str, Any] | None, context: str | None):
        client, config = _kubernetes()
        self._client_mod = client
        try:
            if isinstance(kubeconfig, dict):
                api = config.new_client_from_config_dict(kubeconfig, context=context)
            else:
                api = config.new_client_from_config(config_file=kubeconfig, context=context)
        except config.ConfigException as exc:
            raise CredentialsError(f"kubernetes: cannot load kubeconfig: {exc}",
                                   hint="check the cluster's `kubeconfig` / `context`, or `foundry create secret kubeconfig`") from exc
        self.api = api
        self.core = client.CoreV1Api(api)
        self.batch = client.BatchV1Api(api)

    def _call(self, what: str, fn, *args, **kwargs):
        api_exc = self._client_mod.exceptions.ApiException
        try:
            return fn(*args, **kwargs)
        except api_exc as exc:
            message = exc.reason or ""
            try:
                message = json.loads(exc.body or "{}").get("message") or message
            except (ValueError, AttributeError):
                pass
            if exc.status in (401, 403):
                raise CredentialsError(f"kubernetes: {what}: {message}",
                                       hint="the kubeconfig's credentials were refused or lack permission") from exc
            if exc.status == 404:
                raise NotFound(f"kubernetes: {what}: not found") from exc
            if exc.status == 409:
                raise ProviderError(f"kubernetes: {what}: already exists", hint="run dryrun again for a new name") from exc
            raise ProviderError(f"kubernetes: {what} failed ({exc.status}): {message}") from exc
        except OSError as exc:  # connection refused, DNS, TLS (urllib3 errors derive from it)
            raise ProviderError(f"kubernetes: {what}: cannot reach the API server: {exc}") from exc

    # ---- objects (plain dicts in, plain dicts out)
    def _dict(self, obj) -> dict[str, Any]:
        return self.api.sanitize_for_serialization(obj)

    def create(self, doc: dict[str, Any]) -> dict[str, Any]:
        ns, kind = doc["metadata"]["namespace"], doc["kind"]
        fn = {"Job": self.batch.create_namespaced_job, "Service": self.core.create_namespaced_service,
              "Secret": self.core.create_namespaced_secret}[kind]
        return self._dict(self._call(f"create {kind} {doc['metadata']['name']}", fn, ns, doc))

    def get_job(self, ns: str, name: str) -> dict[str, Any] | None:
        try:
            return self._dict(self._call(f"get Job {name}", self.batch.read_namespaced_job, name, ns))
        except NotFound:
            return None

    def patch_job(self, ns: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return self._dict(self._call(f"patch Job {name}", self.batch.patch_namespaced_job, name, ns, patch))

    def patch(self, kind: str, ns: str, name: str, patch: dict[str, Any]) -> None:
        fn = {"Service": self.core.patch_namespaced_service, "Secret": self.core.patch_namespaced_secret}[kind]
        self._call(f"patch {kind} {name}", fn, name, ns, patch)

    def delete(self, kind: str, ns: str, name: str) -> bool:
        fn = {"Job": self.batch.delete_namespaced_job, "Service": self.core.delete_namespaced_service,
              "Secret": self.core.delete_namespaced_secret}[kind]
        kwargs = {"propagation_policy": "Background"} if kind == "Job" else {}
        try:
            self._call(f"delete {kind} {name}", fn, name, ns, **kwargs)
            return True
        except NotFound:
            return False

    def list_jobs(self, ns: str, selector: str) -> list[dict[str, Any]]:
        res = self._call("list Jobs", self.batch.list_namespaced_job, ns, label_selector=selector)
        return self._dict(res).get("items", [])

    def list_pods(self, ns: str, selector: str) -> list[dict[str, Any]]:
        res = self._call("list Pods", self.core.list_namespaced_pod, ns, label_selector=selector)
        return self._dict(res).get("items", [])

    def list_nodes(self) -> list[dict[str, Any]]:
        return self._dict(self._call("list Nodes", self.core.list_node)).get("items", [])

    def pod_log(self, ns: str, pod: str, follow: bool) -> Iterator[str]:
        resp = self._call(f"log of pod {pod}", self.core.read_namespaced_pod_log, pod, ns,
                          container="trainer", follow=follow, _preload_content=False)
        pending = b""
        try:
            for chunk in resp.stream(4096):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    yield line.decode(errors="replace")
        finally:
            resp.release_conn()
        if pending:
            yield pending.decode(errors="replace")
