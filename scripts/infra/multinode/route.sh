#!/usr/bin/env bash
# A network partition between the control plane (this host, where `foundry` and its watchdog run) and one
# namespace cluster: every packet the host sends into the cluster's subnet is dropped (a policy-routing
# blackhole, so connections hang and time out as over a dead WAN link; no iptables/nft needed), except the
# S3 endpoint's replies (the data plane, which in a real deployment does not go through the control plane).
# The nodes keep talking to each other over their bridge; the job's heartbeats go to the shared folder.
#   bash route.sh cut       # squeue/sbatch/scancel to this cluster now time out
#   bash route.sh restore
#   bash route.sh status
set -euo pipefail
. "$(dirname "$0")/lib.sh"
subnet=$MN_NET.0/24
pref=$((20000 + 2 * $(cut -d. -f2 <<<"$MN_NET")))   # one pair of rule priorities per cluster subnet
ours() { ip rule list | grep -E "^($pref|$((pref + 1))):" || true; }
case ${1:?cut|restore|status} in
cut)
  [[ -n $(ours) ]] && { echo "route to $subnet already cut"; exit 0; }
  ip rule add pref "$pref" to "$subnet" ipproto tcp sport "$MN_S3_PORT" lookup main
  ip rule add pref "$((pref + 1))" blackhole to "$subnet"
  echo "route to $subnet cut (S3 replies from port $MN_S3_PORT excepted)" ;;
restore)
  ip rule del pref "$((pref + 1))" 2>/dev/null || true
  ip rule del pref "$pref" 2>/dev/null || true
  echo "route to $subnet restored" ;;
status)
  if [[ -n $(ours) ]]; then echo "cut:"; ours; else echo "route to $subnet open"; fi ;;
*) echo "usage: route.sh cut | restore | status" >&2; exit 2 ;;
esac
