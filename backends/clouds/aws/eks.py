"""The `eks` provider: an Amazon EKS cluster driven by the kubernetes provider.

The kubeconfig is built from `eks.describe_cluster` (endpoint, CA) and a bearer token made the
way `aws eks get-token` makes it: a presigned STS GetCallerIdentity URL carrying the
`x-k8s-aws-id: CLUSTER` header, base64url-encoded behind `k8s-aws-v1.`. Credentials come from
the standard AWS chain (environment, profile, instance role). boto3 is imported only when used.

```yaml
clusters:
  eks-a100:
    provider: eks
    cluster_name: training    # the EKS cluster
    region: us-west-2
    profile: ml               # optional AWS profile
    namespace: ml             # plus any kubernetes provider key (image, tolerations, ...)
```
"""

from __future__ import annotations

import base64
from typing import Any

from foundry.plugins.errors import ConfigError, CredentialsError, ProviderError

from ...compute.kubernetes import KubernetesProvider

TOKEN_PREFIX = "k8s-aws-v1."
TOKEN_EXPIRES_S = 60   # as aws-iam-authenticator: the presigned URL is valid 15 min regardless


def eks_kubeconfig(cluster: dict[str, Any], token: str) -> dict[str, Any]:
    """A kubeconfig dict from describe_cluster()['cluster'] and a bearer token."""
    name = cluster["name"]
    try:
        server, ca = cluster["endpoint"], cluster["certificateAuthority"]["data"]
    except KeyError as exc:
        raise ProviderError(f"eks: cluster {name} has no endpoint yet (status {cluster.get('status')})",
                            hint="wait until the cluster is ACTIVE") from exc
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority-data": ca}}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
    }


def eks_token(session, cluster_name: str, region: str) -> str:
    """`aws eks get-token` in-process: a presigned STS GetCallerIdentity URL as a bearer token."""
    from botocore.signers import RequestSigner

    credentials = session.get_credentials()
    if credentials is None:
        raise CredentialsError("eks: no AWS credentials found",
                               hint="set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a `profile` in the cluster config")
    sts = session.client("sts", region_name=region)
    signer = RequestSigner(sts.meta.service_model.service_id, region, "sts", "v4", credentials, session.events)
    params = {
        "method": "GET",
        "url": f"https://sts.{region}.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15",
        "body": {}, "headers": {"x-k8s-aws-id": cluster_name}, "context": {},
    }
    url = signer.generate_presigned_url(params, region_name=region, expires_in=TOKEN_EXPIRES_S, operation_name="")
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


class EKSProvider(KubernetesProvider):
    name = "eks"
    config_keys = frozenset({"cluster_name", "region", "profile"})
    client_max_age = 600.0   # tokens live 15 minutes

    def __init__(self, cluster_config: dict[str, Any] | None = None):
        super().__init__(cluster_config)
        for key in ("cluster_name", "region"):
            if not self.raw_config.get(key):
                raise ConfigError(f"eks cluster config needs `{key}`")

    def session(self):
        try:
            import boto3
        except ImportError as exc:
            raise ConfigError("the eks provider needs boto3", hint="pip install 'foundry-anywhere[aws]'") from exc
        return boto3.Session(profile_name=self.raw_config.get("profile"), region_name=self.raw_config["region"])

    def eks_client(self, session):
        return session.client("eks", region_name=self.raw_config["region"])

    def kubeconfig(self) -> dict[str, Any]:
        from botocore.exceptions import BotoCoreError, ClientError

        session = self.session()
        name, region = self.raw_config["cluster_name"], self.raw_config["region"]
        try:
            cluster = self.eks_client(session).describe_cluster(name=name)["cluster"]
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("AccessDeniedException", "UnrecognizedClientException", "ExpiredTokenException"):
                raise CredentialsError(f"eks: {code} describing cluster {name}") from exc
            if code == "ResourceNotFoundException":
                raise ConfigError(f"eks: no cluster {name!r} in {region}") from exc
            raise ProviderError(f"eks: describe_cluster {name} failed: {code}") from exc
        except BotoCoreError as exc:
            raise CredentialsError(f"eks: {exc}") from exc
        return eks_kubeconfig(cluster, eks_token(session, name, region))
