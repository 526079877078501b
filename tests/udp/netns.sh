#!/usr/bin/env bash
# test_udp_netns: the decoder service (cudaq-udp-serve, MWPM) in one network
# namespace, the FPGA emulator (cudaq-udp-emu) in another, joined by a veth
# pair. Phase 1 without loss, phase 2 with tc netem loss on both directions
# (when netem is available). In each phase every request the emulator lost
# must be explained: lost = the server's ring-full drops + its send errors
# + the packets netem dropped (requests and responses).
# Usage: netns.sh SERVE EMU DATA_DIR. Exit 77 (skipped) when not root or
# without `ip netns`; namespaces are created and deleted here.
set -u
SERVE=$1 EMU=$2 DATA=$3
[ "$(id -u)" = 0 ] || { echo "skipped: not root"; exit 77; }
command -v ip >/dev/null || { echo "skipped: no ip"; exit 77; }
A=cudaq_udp_a_$$ B=cudaq_udp_b_$$ VA=cuva$$ VB=cuvb$$
TMP=$(mktemp -d)
cleanup() { ip netns del "$A" 2>/dev/null; ip netns del "$B" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
ip netns add "$A" 2>/dev/null && ip netns add "$B" 2>/dev/null || { echo "skipped: ip netns add failed"; exit 77; }
set -e
ip link add "$VA" type veth peer name "$VB"
ip link set "$VA" netns "$A"
ip link set "$VB" netns "$B"
for ns in "$A" "$B"; do
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 || true # no IPv6 chatter for netem to drop
  ip netns exec "$ns" ip link set lo up
done
ip netns exec "$A" ip addr add 10.77.0.1/24 dev "$VA"
ip netns exec "$B" ip addr add 10.77.0.2/24 dev "$VB"
ip netns exec "$A" ip link set "$VA" up
ip netns exec "$B" ip link set "$VB" up
# Static neighbours: no ARP packets for netem to drop.
MA=$(ip netns exec "$A" cat /sys/class/net/"$VA"/address)
MB=$(ip netns exec "$B" cat /sys/class/net/"$VB"/address)
ip netns exec "$A" ip neigh replace 10.77.0.2 lladdr "$MB" dev "$VA" nud permanent
ip netns exec "$B" ip neigh replace 10.77.0.1 lladdr "$MA" dev "$VB" nud permanent
set +e

qdrops() { # netem drops on a device: qdrops NS DEV
  ip netns exec "$1" tc -s qdisc show dev "$2" | sed -nE 's/.*dropped ([0-9]+).*/\1/p' | head -1
}
fail=0
phase() { # phase NAME LOSS_PERCENT (0: no netem)
  local name=$1 loss=$2 port=47$((RANDOM % 900 + 100))
  ip netns exec "$A" "$SERVE" --dem "$DATA/d3.dem" --bind 10.77.0.1 --port "$port" --seconds 4 \
    --counters "$TMP/$name.ctr" > "$TMP/$name.serve" 2>&1 &
  local spid=$!
  sleep 0.7
  ip netns exec "$B" "$EMU" --shots "$DATA/d3_shots.01" --format 01 --dem "$DATA/d3.dem" \
    --host 10.77.0.1 --port "$port" --rate 5000 --count 3000 --wait-ms 1000 --max-lost 3000 \
    > "$TMP/$name.emu" 2>&1
  local erc=$?
  wait "$spid"
  local line lost ring txe da=0 db=0
  line=$(grep -E "^sent " "$TMP/$name.emu")
  lost=$(sed -nE 's/.* lost ([0-9]+),.*/\1/p' <<<"$line")
  ring=$(sed -nE 's/^drop_ring_full=([0-9]+)/\1/p' "$TMP/$name.ctr")
  txe=$(sed -nE 's/^tx_errors=([0-9]+)/\1/p' "$TMP/$name.ctr")
  if [ "$loss" != 0 ]; then da=$(qdrops "$A" "$VA"); db=$(qdrops "$B" "$VB"); fi
  echo "$name: $line"
  echo "$name: server ring-full $ring, send errors $txe; netem dropped $db requests, $da responses"
  if [ "$erc" != 0 ] || [ -z "$lost" ] || [ "$lost" != $((ring + txe + da + db)) ]; then
    echo "$name: FAILED (emulator exit $erc)"; cat "$TMP/$name.emu" "$TMP/$name.serve"; fail=1
  fi
}
phase clean 0
if ip netns exec "$A" tc qdisc add dev "$VA" root netem loss 5% 2>/dev/null &&
   ip netns exec "$B" tc qdisc add dev "$VB" root netem loss 5% 2>/dev/null; then
  phase netem 5
else
  echo "netem not available: loss phase skipped"
fi
[ "$fail" = 0 ] && echo "PASS" || echo "FAIL"
exit $fail
