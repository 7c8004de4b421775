#!/usr/bin/env bash
# Bootstrap time of the ssh provider: `foundry run` -> the launch recorded (the CLI returns) -> the first
# training step (rank 0's step-1 record), on a 2-host fleet (namespace nodes with sshd, the hosts'
# python given: no venv build) against the local cluster, 2 processes each, alternated.
#   sudo bash bench/multinode/ssh_bootstrap.sh        (root: namespaces; ~2 min; leaves nothing behind)
# Not a timed test: CI never asserts these. Measured (2 shared cores, load average 14-16):
#   fleet: run returned 5.3 s / 5.0 s, first step 21.9 s / 15.5 s; environment ready 0.8-1.0 s a host
#   local: run returned 1.8 s / 1.1 s, first step 13.5 s / 10.3 s
set -euo pipefail
cd "$(dirname "$0")/../.."
B=$(mktemp -d "${TMPDIR:-/tmp}/ssh-bootstrap.XXXX"); trap 'trap - EXIT; bash scripts/infra/multinode/down.sh >/dev/null 2>&1; rm -rf "$B"' EXIT INT TERM
export MN_NODES=2 MN_NS_PREFIX=mnf MN_NET=10.216.0 MN_BRIDGE=mnfbr MN_VETH_PREFIX=mnfv MN_TAP_PREFIX=mnfw \
  MN_ROOT=$B/root MN_RUN=/run/foundry-mnf MN_SLURM=0 MN_S3=none MN_SSHD=1 MN_SSH_AUTHORIZED_KEYS=$B/ak
ssh-keygen -q -t ed25519 -N '' -f $B/key; cp $B/key.pub $B/ak
bash scripts/infra/multinode/up.sh >/dev/null
export FOUNDRY_HOME=$B/home FOUNDRY_DISABLE_PLUGIN_AUTOLOAD=1
F=.venv/bin/foundry
$F create secret ssh fleet-key --private-key - < $B/key >/dev/null
$F create cluster fleet --provider ssh -o hosts=root@10.216.0.1,root@10.216.0.2 -o gpus_per_host=1 \
  -o secret=fleet-key -o python=$PWD/.venv/bin/python -o "remote_dir=$B/remote/{host}" >/dev/null
.venv/bin/python -c "import sys; sys.path.insert(0,'examples/move-run'); from data import write_dataset; write_dataset('$B/data', n=144)"
for cluster in fleet local fleet local; do
  name=m-$cluster-$RANDOM; gpus=2; nodes=2; [[ $cluster == local ]] && nodes=1
  cat > $B/$name.yaml <<Y
name: $name
command: [$PWD/tests/multinode/train_job.py]
compute: {cluster: $cluster, nodes: $nodes, gpus: $gpus}
env_variables: {DATA_URL: $B/data, SAVE_URL: "$B/ckpt/{run_name}", STEPS: "12", GLOBAL_BATCH: "12", NODE_LOCAL_ROOT: $B/root, OMP_NUM_THREADS: "1"}
Y
  t0=$(date +%s.%N)
  $F run -f $B/$name.yaml >/dev/null
  t1=$(date +%s.%N)
  f=$B/home/runs/$name/samples-r0-rank0.jsonl
  until [[ -s $f ]]; do sleep 0.2; done
  t2=$(date +%s.%N)
  until $F describe run $name --json | .venv/bin/python -c "import json,sys; sys.exit(json.load(sys.stdin)['status'] in ('pending','running','stopping'))"; do sleep 1; done
  env=$($F logs $name 2>/dev/null | grep -o "environment ready on [^:]* in [0-9.]* s" | tr '\n' ';' || true)
  printf '%s: foundry run returned %.1f s, first step at %.1f s; %s\n' "$cluster" "$(echo "$t1-$t0"|bc)" "$(echo "$t2-$t0"|bc)" "$env"
done
