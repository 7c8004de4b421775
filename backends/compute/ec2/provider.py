"""The `ec2` compute provider: instances made for one resumption, the job run on them by the `ssh`
provider, the instances terminated when the resumption ends.

launch(): (1) the ledger records the launch (token, run, resumption, count) before anything is
asked of EC2; (2) RunInstances with ClientToken=token and the tags foundry-token / foundry-run /
foundry-resumption / foundry-cluster; (3) the ledger gets the instance ids; (4) wait until every
instance runs and answers SSH (deadline `ssh_wait_s`, a clear error, the instances terminated);
(5) `SshProvider.for_hosts(addresses, private_key=..., user=ssh_user)` launches the job.
Any error after (2) terminates what was made. A process killed anywhere in there leaves a launch
intent whose `reclaim` finds the instances by their token tag and terminates them (the next command
that touches the run calls it); `foundry clean instances` does the same for any tagged instance
whose resumption is not running.
status(): the ssh job's state; a terminal state terminates the instances first. An instance that
AWS ended under the job, or a spot job that paused with nobody asking (the trainer saw the
interruption notice: trainer/preemption.py), makes it LOST (preempted), retry-eligible.
"""

from __future__ import annotations

import dataclasses
import os
import secrets as _secrets
import time
from pathlib import Path
from typing import Any, Iterator

from foundry.plugins.compute import Capabilities, JobHandle, JobRequest, JobState, JobStatus, Plan
from foundry.plugins.errors import ConfigError, ProviderError

from . import catalogue
from .config import Ec2Config
from ..vm.base import NoCapacityError
from ..vm.ledger import Ledger
from ..vm.ssh_wait import ssh_answers

TAG = "foundry-token"
LIVE_STATES = ["pending", "running", "stopping", "stopped"]
HOLD_ENV = "FOUNDRY_EC2_HOLD_AT"   # tests: park the launch at a named step so it can be killed there


class Ec2Provider:
    name = "ec2"
    accepts_cluster_context = True   # state_dir (the ledger) and `secret` (the ssh key) resolved by Clusters

    def __init__(self, cluster_config: dict[str, Any] | None = None):
        raw = dict(cluster_config or {})
        self.config = Ec2Config.from_dict(raw)
        self._injection = raw.get("secret_injection")
        self._credentials = raw.get("credentials_injection")
        self.state_dir = Path(self.config.state_dir or Path.home() / ".cache" / "foundry-ec2" / self.config.name)
        self.ledger = Ledger(self.state_dir / "instances")
        gpu_type = (catalogue.catalogue().get(self.config.instance_type) or {}).get("gpu_type")
        self.capabilities = Capabilities(multi_node=True, gpus=self.config.gpus > 0, graceful_stop=True,
                                         preemption_notice=self.config.spot,
                                         gpu_types=(gpu_type,) if gpu_type else ())
        self._client = None

    @staticmethod
    def check_options(options: dict[str, Any]) -> None:
        Ec2Config.from_dict(options)

    # ---- the EC2 API (boto3 only when used; the endpoint from botocore's AWS_ENDPOINT_URL_EC2 / _URL)
    @property
    def ec2(self):
        if self._client is None:
            try:
                import boto3
            except ImportError:
                raise ConfigError("the ec2 provider needs boto3", hint="pip install 'foundry-anywhere[aws]'") from None
            env = getattr(self._credentials, "env", None) or {}
            session = boto3.session.Session(aws_access_key_id=env.get("AWS_ACCESS_KEY_ID"),
                                            aws_secret_access_key=env.get("AWS_SECRET_ACCESS_KEY"),
                                            aws_session_token=env.get("AWS_SESSION_TOKEN"),
                                            region_name=self.config.region)
            self._client = session.client("ec2")
        return self._client

    def _hold(self, step: str) -> None:
        if os.environ.get(HOLD_ENV) == step:
            (self.state_dir / f"held-{step}").touch()
            time.sleep(300)

    # ---- planning
    def dryrun(self, request: JobRequest) -> Plan:
        if not self.config.image:
            raise ConfigError(f"ec2 cluster {self.config.name!r} has no image",
                              hint="-o image=ami-... (an AMI with python; torch is installed by the ssh provider if missing)")
        if self.config.gpus and request.gpus_per_node > self.config.gpus:
            raise ConfigError(f"ec2 cluster {self.config.name!r}: {self.config.instance_type} has {self.config.gpus} "
                              f"GPU(s); the run asks for {request.gpus_per_node} per node",
                              hint="use more nodes, or a larger -o instance_type")
        self._private_key()   # refused here, before anything is made, when the key is missing
        token = f"{request.run_name[:20]}-r{request.resumption}-{_secrets.token_hex(4)}"
        planned = dataclasses.replace(request, extra={**request.extra, "ec2_token": token})
        price = catalogue.hourly_price(self.config.instance_type, self.config.spot)
        summary = (f"ec2 {self.config.region}: {request.nodes} x {self.config.instance_type}"
                   f"{' (spot)' if self.config.spot else ''} at ${price:.3f}/h each, the job over ssh, "
                   f"terminated when the resumption ends")
        return Plan(provider=self.name, request=planned, summary=summary,
                    artifacts={"run_instances": repr(self._run_params(planned, token))})

    def _run_params(self, request: JobRequest, token: str) -> dict[str, Any]:
        c = self.config
        tags = [{"Key": TAG, "Value": token}, {"Key": "foundry-run", "Value": request.run_name},
                {"Key": "foundry-run-id", "Value": request.run_id},
                {"Key": "foundry-resumption", "Value": str(request.resumption)},
                {"Key": "foundry-cluster", "Value": c.name},
                {"Key": "Name", "Value": f"foundry-{request.run_name}-r{request.resumption}"}]
        params: dict[str, Any] = {"ImageId": c.image, "InstanceType": c.instance_type, "MinCount": request.nodes,
                                  "MaxCount": request.nodes, "ClientToken": token,
                                  "TagSpecifications": [{"ResourceType": "instance", "Tags": tags}]}
        if c.key_name:
            params["KeyName"] = c.key_name
        if c.subnet:
            params["SubnetId"] = c.subnet
        if c.security_group:
            params["SecurityGroupIds"] = [c.security_group]
        if c.disk_gb:
            params["BlockDeviceMappings"] = [{"DeviceName": "/dev/sda1",
                                              "Ebs": {"VolumeSize": c.disk_gb, "DeleteOnTermination": True}}]
        if c.spot:
            params["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": {
                "SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"}}
        return params

    def launch_intent(self, plan: Plan) -> dict[str, Any]:
        return {"token": plan.request.extra["ec2_token"]}

    # ---- launching
    def launch(self, plan: Plan) -> JobHandle:
        request, token = plan.request, plan.request.extra["ec2_token"]
        c = self.config
        self.ledger.write(token, state="intent", cluster=c.name, region=c.region, run=request.run_name,
                          run_id=request.run_id, resumption=request.resumption, count=request.nodes,
                          instance_type=c.instance_type, spot=c.spot,
                          price_per_hour=catalogue.hourly_price(c.instance_type, c.spot))
        self._hold("before_request")
        try:
            reply = _no_capacity_as_retryable(self.ec2.run_instances, **self._run_params(request, token))
            self._hold("after_request")
            ids = [i["InstanceId"] for i in reply["Instances"]]
            self.ledger.write(token, state="requested", instance_ids=ids, launched_at=time.time())
            self._hold("waiting_ssh")
            hosts = self._wait_ready(ids)
            ssh = self._ssh(hosts)
            if c.spot:   # the trainer watches the interruption notice (trainer/preemption.py)
                request = dataclasses.replace(request, env={**request.env, "FOUNDRY_PREEMPTION_NOTICE": "aws"})
            ssh_handle = ssh.launch(ssh.dryrun(request))
        except BaseException:
            self.terminate(token)
            raise
        self.ledger.write(token, hosts=hosts)
        return JobHandle(provider=self.name, cluster=c.name, job_id=f"ec2-{token}",
                         data={"token": token, "instance_ids": ids, "hosts": hosts, "instances": len(ids),
                               "instance_type": c.instance_type, "spot": c.spot,   # for the run's cost
                               "price_per_hour": catalogue.hourly_price(c.instance_type, c.spot) * len(ids),
                               "ssh_job_id": ssh_handle.job_id, "ssh": ssh_handle.data})

    def _wait_ready(self, ids: list[str]) -> list[str]:
        """Each instance's address once it runs and its port 22 answers with an SSH banner."""
        deadline = time.monotonic() + self.config.ssh_wait_s
        addresses: dict[str, str] = {}
        while True:
            reply = self.ec2.describe_instances(InstanceIds=ids)
            for res in reply["Reservations"]:
                for inst in res["Instances"]:
                    state = inst["State"]["Name"]
                    if state in ("shutting-down", "terminated", "stopped", "stopping"):
                        raise ProviderError(f"ec2: instance {inst['InstanceId']} is {state} before the job started "
                                            f"({(inst.get('StateReason') or {}).get('Message', 'no reason given')})")
                    addr = inst.get("PublicIpAddress") or inst.get("PrivateIpAddress")
                    if state == "running" and addr and ssh_answers(addr, port=22):
                        addresses[inst["InstanceId"]] = addr
            if len(addresses) == len(ids):
                return [addresses[i] for i in ids]
            if time.monotonic() > deadline:
                waiting = ", ".join(i for i in ids if i not in addresses)
                raise ProviderError(f"ec2: SSH did not answer on {waiting} within {self.config.ssh_wait_s:.0f}s "
                                    "(instances terminated)",
                                    hint="check that the security group lets this machine reach port 22 and the "
                                         "image runs sshd, or raise -o ssh_wait_s")
            time.sleep(2.0)

    def _private_key(self) -> bytes:
        files = getattr(self._injection, "files", None) or {}
        key = next((v for p, v in files.items() if p.endswith("/id_key")), None)
        if key is None:
            raise ConfigError(f"ec2 cluster {self.config.name!r} needs an ssh key: -o secret=NAME",
                              hint="foundry create secret ssh NAME --private-key PATH (the key pair's private key)")
        return key

    def _ssh(self, hosts: list[str]):
        from ..ssh import SshProvider

        return SshProvider.for_hosts(hosts, private_key=self._private_key(), user=self.config.ssh_user,
                                     name=self.config.name, state_dir=str(self.state_dir / "ssh"),
                                     gpus_per_host=self.config.gpus, **self.config.ssh_options)

    @staticmethod
    def _ssh_handle(handle: JobHandle) -> JobHandle:
        return JobHandle(provider="ssh", cluster=handle.cluster, job_id=handle.data["ssh_job_id"],
                         data=handle.data["ssh"])

    # ---- observing and ending
    def status(self, handle: JobHandle) -> JobStatus:
        gone = self._ended_instances(handle.data["instance_ids"])
        if gone:
            self.terminate(handle.data["token"])
            return JobStatus(JobState.LOST, reason=f"ec2: instance(s) ended under the job: {gone}")
        status = self._ssh(handle.data["hosts"]).status(self._ssh_handle(handle))
        if status.state.terminal:
            self.terminate(handle.data["token"])
            asked = (self.ledger.get(handle.data["token"]) or {}).get("stop_requested")
            if status.state is JobState.PAUSED and self.config.spot and not asked:
                # nobody here asked it to stop: it paused on the spot interruption notice
                return JobStatus(JobState.LOST, exit_code=status.exit_code, nodes=status.nodes,
                                 reason="preempted: spot interruption notice (paused with a checkpoint)")
        return status

    def _ended_instances(self, ids: list[str]) -> str:
        reply = self.ec2.describe_instances(InstanceIds=ids)
        ended = [f"{i['InstanceId']} {i['State']['Name']} ({(i.get('StateReason') or {}).get('Message', '')})"
                 for r in reply["Reservations"] for i in r["Instances"]
                 if i["State"]["Name"] in ("shutting-down", "terminated", "stopping", "stopped")]
        return "; ".join(ended)

    def logs(self, handle: JobHandle, follow: bool = False, rank: int | None = None) -> Iterator[str]:
        """The job's logs, read over ssh from the instances: only while they are there. Once they are
        terminated, one `[foundry]` line says so (at once, not after ssh's timeouts on addresses gone)."""
        record = self.ledger.get(handle.data["token"]) or {}
        if record.get("state") == "terminated":
            ended = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.get("ended_at") or time.time()))
            return iter([f"[foundry] no logs: they were on the instances of job {handle.job_id} "
                         f"({', '.join(handle.data['instance_ids'])}), terminated when it ended ({ended}); "
                         f"`foundry logs {handle.data['ssh'].get('run_name') or 'NAME'} --follow` reads them while "
                         "the run is active"])
        return self._ssh(handle.data["hosts"]).logs(self._ssh_handle(handle), follow=follow, rank=rank)

    def stop(self, handle: JobHandle, graceful: bool = True) -> None:
        self.ledger.write(handle.data["token"], stop_requested=time.time())   # a pause then is not a preemption
        try:
            self._ssh(handle.data["hosts"]).stop(self._ssh_handle(handle), graceful=graceful)
        finally:
            if not graceful:   # a hard stop: nothing to wait for (a graceful one ends at status: paused)
                self.terminate(handle.data["token"])

    def reclaim(self, intent: dict[str, Any]) -> JobHandle | None:
        """The launching process died before recording a handle: terminate what it made; never adopt
        (the job was not started, or started without anyone recording how to stop it)."""
        self.terminate(intent["token"])
        return None

    def terminate(self, token: str) -> list[str]:
        """Terminate every live instance of one launch, found by its tag and by the ledger's ids."""
        record = self.ledger.get(token) or {}
        ids = set(record.get("instance_ids") or [])
        reply = self.ec2.describe_instances(Filters=[{"Name": f"tag:{TAG}", "Values": [token]},
                                                     {"Name": "instance-state-name", "Values": LIVE_STATES}])
        ids |= {i["InstanceId"] for r in reply["Reservations"] for i in r["Instances"]}
        if ids:
            self.ec2.terminate_instances(InstanceIds=sorted(ids))
        if record:
            self.ledger.write(token, state="terminated", instance_ids=sorted(ids),
                              ended_at=record.get("ended_at") or time.time())
        return sorted(ids)

    # ---- what Foundry has running, and the sweep
    def instances(self) -> list[dict[str, Any]]:
        """Live instances tagged by this cluster, with what each has cost so far (catalogue price)."""
        reply = self.ec2.describe_instances(Filters=[{"Name": "tag:foundry-cluster", "Values": [self.config.name]},
                                                     {"Name": "instance-state-name", "Values": LIVE_STATES}])
        rows, now = [], time.time()
        for r in reply["Reservations"]:
            for inst in r["Instances"]:
                tags = {t["Key"]: t["Value"] for t in inst.get("Tags") or []}
                spot = inst.get("InstanceLifecycle") == "spot"
                price = catalogue.hourly_price(inst["InstanceType"], spot)
                started = inst["LaunchTime"].timestamp()
                rows.append({"instance": inst["InstanceId"], "cluster": self.config.name, "provider": self.name,
                             "run": tags.get("foundry-run"), "resumption": tags.get("foundry-resumption"),
                             "token": tags.get(TAG), "type": inst["InstanceType"], "spot": spot,
                             "state": inst["State"]["Name"],
                             "address": inst.get("PublicIpAddress") or inst.get("PrivateIpAddress"),
                             "hours": round(max(0.0, now - started) / 3600, 4), "price_per_hour": price,
                             "cost": round(max(0.0, now - started) / 3600 * price, 4)})
        return rows

    def clean_instances(self, keep_tokens: set[str]) -> list[str]:
        """Terminate every live instance of this cluster whose launch token is not in `keep_tokens`
        (the resumptions that are running or still launching)."""
        tokens = {row["token"] for row in self.instances()} | {
            rec["token"] for rec in self.ledger.records() if rec.get("state") != "terminated"}
        return [i for t in sorted(tokens - keep_tokens - {None}) for i in self.terminate(t)]

    def list(self) -> list[JobHandle]:
        return []

    def describe(self) -> dict[str, Any]:
        """From the configuration: capacity is what EC2 will give (instances are made per run)."""
        nodes = 16
        return {"provider": self.name, "nodes": nodes, "gpus": nodes * self.config.gpus,
                "devices": nodes * (self.config.gpus or 1), "state": "ready", "region": self.config.region,
                "instance_type": self.config.instance_type, "spot": self.config.spot,
                "price_per_hour": catalogue.hourly_price(self.config.instance_type, self.config.spot)}


# EC2's answers for "none left now" (the AZ's pool, the account's limits): retry-eligible, like gce/oci-vm's
NO_CAPACITY = {"InsufficientInstanceCapacity", "InstanceLimitExceeded", "VcpuLimitExceeded",
               "MaxSpotInstanceCountExceeded", "InsufficientCapacityOnHost", "SpotMaxPriceTooLow"}


def _no_capacity_as_retryable(call, **params):
    try:
        return call(**params)
    except Exception as exc:
        code = (getattr(exc, "response", None) or {}).get("Error", {}).get("Code")
        if code in NO_CAPACITY:
            message = str((exc.response.get("Error") or {}).get("Message") or code).splitlines()[0][:300]
            raise NoCapacityError(f"ec2: no capacity: {code}: {message}",
                                  hint="another region, instance type or spot/on-demand, or a failover placement; "
                                       "the run is retry-eligible") from None
        raise
