#!/usr/bin/env bash
# WAN emulation for one node. This kernel has no sch_netem (CONFIG_NET_SCH_NETEM unset), so:
#   delay: the node's veth is swapped for a pair of taps joined by `linkwire` (userspace, fixed one-way delay)
#   rate:  tbf on both taps (kernel): host-side tap = the node's downloads, node-side eth0 = its uploads
#   bash wan.sh on NODE DELAY_MS [RATE|none]    e.g.  bash wan.sh on 2 20 200mbit   (RTT = 2 x DELAY_MS)
#   bash wan.sh off NODE                        back to a plain veth (re-runs up.sh, which is idempotent)
#   bash wan.sh status
# Where netem exists, the one-liner is: tc qdisc replace dev mnvN root netem delay 20ms rate 200mbit
# (plus the same on eth0 inside the namespace for the other direction).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cmd=${1:-status}; n=${2:-2}; ns=$(mn_ns "$n"); tap=$MN_TAP_PREFIX$n
WIRE=$MN_ROOT/bin/linkwire; PF=$MN_ROOT/run/wire-$ns.pid; CTL=$MN_ROOT/run/wire-$ns.delay
wire_up() { [[ -f $PF ]] && kill -0 "$(cat "$PF")" 2>/dev/null; }
case $cmd in
on)
  delay=${3:?delay ms}; rate=${4:-none}
  if ! command -v cc >/dev/null; then   # linkwire is built on first use (a fresh CI machine may lack a compiler)
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null
  fi
  if [[ ! -x $WIRE || $MN_HERE/linkwire.c -nt $WIRE ]]; then mkdir -p "$(dirname "$WIRE")"; cc -O2 -o "$WIRE" "$MN_HERE/linkwire.c"; fi
  echo "$delay" >"$CTL"
  if ! ip link show "$tap" >/dev/null 2>&1; then      # swap veth -> tap pair (node keeps its address)
    ip link show "$(mn_veth "$n")" >/dev/null 2>&1 && ip link delete "$(mn_veth "$n")"
    ip tuntap add dev "$tap" mode tap
    sysctl -qw "net.ipv6.conf.$tap.disable_ipv6=1" || true
    ip link set "$tap" master "$MN_BRIDGE" up
    ip -n "$ns" tuntap add dev eth0 mode tap
    ip -n "$ns" addr add "$(mn_ip "$n")/24" dev eth0
    ip -n "$ns" link set eth0 up
    for r in ${MN_ROUTES:-}; do ip -n "$ns" route replace "$r" via "$MN_HOST_IP" dev eth0; done
  fi
  if ! wire_up; then
    nohup "$WIRE" "$tap" "/run/netns/$ns" eth0 "$delay" "$CTL" >>"$MN_ROOT/log/wire-$ns.log" 2>&1 </dev/null &
    echo $! >"$PF"; sleep 0.3
  else
    kill -HUP "$(cat "$PF")"
  fi
  if [[ $rate == none ]]; then
    tc qdisc del dev "$tap" root 2>/dev/null || true; tc -n "$ns" qdisc del dev eth0 root 2>/dev/null || true
  else
    # burst >= rate/HZ and a few MTUs; latency bounds the tbf queue (tail drop beyond it)
    tc qdisc replace dev "$tap" root tbf rate "$rate" burst 256kb latency 100ms
    tc -n "$ns" qdisc replace dev eth0 root tbf rate "$rate" burst 256kb latency 100ms
  fi
  for _ in $(seq 1 50); do ip netns exec "$ns" ping -c1 -W1 -q "$MN_HOST_IP" >/dev/null 2>&1 && break; sleep 0.1; done
  echo "$ns: WAN on (delay ${delay} ms each way, rate $rate); $(ip netns exec "$ns" ping -c3 -i0.2 -q "$MN_HOST_IP" | tail -1)" ;;
off)
  if wire_up; then kill -TERM "$(cat "$PF")"; sleep 0.2; fi; rm -f "$PF" "$CTL"
  ip link show "$tap" >/dev/null 2>&1 && ip link delete "$tap"
  ip -n "$ns" link show eth0 2>/dev/null | grep -q . && [[ $(ip -n "$ns" -d link show eth0) == *tun* ]] && ip -n "$ns" link delete eth0
  bash "$MN_HERE/up.sh" >/dev/null
  echo "$ns: WAN off (veth); $(ip netns exec "$ns" ping -c3 -i0.2 -q "$MN_HOST_IP" | tail -1)" ;;
status)
  for i in $(mn_nodes); do
    s=$(mn_ns "$i")
    if ip link show "$MN_TAP_PREFIX$i" >/dev/null 2>&1; then echo "$s: tap+linkwire delay $(cat "$MN_ROOT/run/wire-$s.delay" 2>/dev/null) ms; $(tc qdisc show dev "$MN_TAP_PREFIX$i" | head -1)"
    else echo "$s: veth $(tc qdisc show dev "$(mn_veth "$i")" | head -1)"; fi
  done ;;
*) echo "usage: wan.sh on NODE DELAY_MS [RATE] | off NODE | status" >&2; exit 2 ;;
esac
