#!/bin/sh
# Two hosts on one machine: two network namespaces joined by a veth pair, one rank in each, talking
# over Open MPI's TCP transport only (no shared memory between them). Runs the distributed suite
# there. Exits 77 (ctest: skipped) with the reason when namespaces cannot be made (not root, no
# CAP_SYS_ADMIN, no `ip`).
#   run_two_hosts.sh <tg_distributed_tests> <mpirun> [options for every mpirun]
set -u
program="$1"
shift  # "$@": mpirun and its options
here="$(cd "$(dirname "$0")" && pwd)"
a="tg$$-a"  # host names: letters, digits and hyphens only (Open MPI refuses '_')
b="tg$$-b"
skip() {
  echo "SKIPPED: $1" >&2
  exit 77
}
command -v ip >/dev/null 2>&1 || skip "no 'ip' command (iproute2) to make network namespaces"
ip netns add "$a" 2>/dev/null || skip "cannot create network namespaces here (needs root or CAP_SYS_ADMIN)"
cleanup() {
  ip netns del "$a" 2>/dev/null
  ip netns del "$b" 2>/dev/null
  rm -f "$hosts"
}
hosts="$(mktemp)"
trap cleanup EXIT
ip netns add "$b" || skip "cannot create a second network namespace"
ip link add "veth$$a" type veth peer name "veth$$b" || skip "cannot create a veth pair"
ip link set "veth$$a" netns "$a" && ip link set "veth$$b" netns "$b" &&
  ip -n "$a" addr add 10.77.0.1/24 dev "veth$$a" && ip -n "$b" addr add 10.77.0.2/24 dev "veth$$b" &&
  ip -n "$a" link set "veth$$a" up && ip -n "$b" link set "veth$$b" up &&
  ip -n "$a" link set lo up && ip -n "$b" link set lo up || skip "cannot configure the veth pair"
# mpirun runs in host a (its rank is local there); host b's daemon starts through netns_agent.sh.
printf 'localhost slots=1\n%s slots=1\n' "$b" >"$hosts"
TG_DIST_HOSTS=2 ip netns exec "$a" "$@" --allow-run-as-root --hostfile "$hosts" -np 2 \
  --mca plm_rsh_agent "$here/netns_agent.sh" -x TG_DIST_HOSTS \
  --mca oob_tcp_if_include 10.77.0.0/24 --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 \
  "$program"
