#!/bin/sh
# Open MPI's remote shell for run_two_hosts.sh: where mpirun would ssh to host H, run the command
# in the network namespace named H instead (plm_rsh_agent calls this as `agent H command...`).
host="$1"
shift
exec ip netns exec "$host" sh -c "$*"
