#!/bin/sh
# Runs an MPI program on two "hosts" of this machine: two network namespaces, each with its
# own address on a veth pair (10.213.0.1 and 10.213.0.2), MPI's traffic forced onto TCP over
# that link. mpirun starts in the first; it starts the second host's daemon through an
# "rsh agent" that enters the second namespace instead of ssh-ing to another machine. This
# is the path of a job across hosts, from the launch to the collectives.
#   two_hosts.sh <mpirun> <program> [arguments...]
# Needs root and `ip` (iproute2); else it says SKIPPED and succeeds. The namespaces are
# named after this script's pid and removed at exit.
set -eu
mpirun=$1
shift
skip() {
  echo "two_hosts.sh: SKIPPED: $1"
  exit 0
}
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
command -v ip > /dev/null || skip "ip (iproute2) is not installed"
id=$$
a=kiln_a_$id
b=kiln_b_$id
work=$(mktemp -d)
cleanup() {
  ip netns del "$a" 2> /dev/null || true
  ip netns del "$b" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
ip netns add "$a" 2> /dev/null || skip "cannot create a network namespace here"
ip netns add "$b"
ip link add "ka$id" netns "$a" type veth peer name "kb$id" netns "$b"
ip -n "$a" addr add 10.213.0.1/24 dev "ka$id"
ip -n "$b" addr add 10.213.0.2/24 dev "kb$id"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "ka$id" up
ip -n "$b" link set "kb$id" up

# The rsh agent: `agent <host> <command>` runs the command in that host's namespace.
cat > "$work/agent" << AGENT
#!/bin/sh
host=\$1
shift
case \$host in
  10.213.0.1) ns=$a ;;
  10.213.0.2) ns=$b ;;
  *) echo "two_hosts.sh: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec \$ns /bin/sh -c "\$*"
AGENT
chmod +x "$work/agent"
printf '10.213.0.1 slots=1\n10.213.0.2 slots=1\n' > "$work/hosts"

# Each rank prints the network namespace and address it runs in, then the program runs.
ip netns exec "$a" "$mpirun" --allow-run-as-root -np 2 --hostfile "$work/hosts" --mca plm_rsh_agent "$work/agent" \
  --mca btl tcp,self --mca btl_tcp_if_include 10.213.0.0/24 --mca oob_tcp_if_include 10.213.0.0/24 \
  sh -c 'echo "two_hosts.sh: rank $OMPI_COMM_WORLD_RANK in $(readlink /proc/self/ns/net) at $(ip -o -4 addr show | grep -o "10\.213\.0\.[0-9]*")"'
ip netns exec "$a" "$mpirun" --allow-run-as-root -np 2 --hostfile "$work/hosts" --mca plm_rsh_agent "$work/agent" \
  --mca btl tcp,self --mca btl_tcp_if_include 10.213.0.0/24 --mca oob_tcp_if_include 10.213.0.0/24 \
  -x KILN_DIST_TIMEOUT "$@"
# (not exec: the trap removes the namespaces when it ends; set -e passes its failure on)
