#!/usr/bin/env bash
# A job started without an MPI launcher (docs/distributed.md): two processes started by hand
# with KILN_RANK, KILN_WORLD_SIZE and KILN_DIST_RENDEZVOUS find each other through rank 0's
# ompi-server and MPI port, then run the collectives and the 2-rank MLP. Then a rank that
# never comes: the other ends within KILN_DIST_TIMEOUT with the error naming the rendezvous.
#   no_launcher.sh <kiln_dist_tests> <gtest filter>
set -uo pipefail
tests=$1
filter=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
unset OMPI_COMM_WORLD_SIZE PMIX_RANK PMI_SIZE PMI_RANK
export KILN_WORLD_SIZE=2 KILN_DIST_RENDEZVOUS=$dir/job KILN_DIST_TIMEOUT=${KILN_DIST_TIMEOUT:-60}
KILN_RANK=1 "$tests" --gtest_filter="$filter" > "$dir/rank1.log" 2>&1 &
one=$!
KILN_RANK=0 "$tests" --gtest_filter="$filter" > "$dir/rank0.log" 2>&1
zero_status=$?
wait $one
one_status=$?
for r in 0 1; do echo "== rank $r"; tail -n 3 "$dir/rank$r.log"; done
if ((zero_status != 0 || one_status != 0)); then
  echo "no_launcher.sh: FAILED (rank 0 exit $zero_status, rank 1 exit $one_status)"
  cat "$dir/rank0.log" "$dir/rank1.log" | grep -v "^\[ *\(RUN\|OK\) " | head -40
  exit 1
fi
grep -q "PASSED" "$dir/rank0.log" && grep -q "PASSED" "$dir/rank1.log" || { echo "no_launcher.sh: FAILED (no PASSED)"; exit 1; }
# One rank alone stops with the rendezvous error instead of waiting: rank 1 finds no rank 0
# (nobody writes <path>.server), rank 0 sees nobody connect (its watchdog ends it at the
# timeout, its ompi-server and files gone with it).
alone() {  # alone <rank> <rendezvous name> <expected message>
  KILN_DIST_TIMEOUT=3 KILN_RANK=$1 KILN_DIST_RENDEZVOUS=$dir/$2 "$tests" --gtest_filter="$filter" > "$dir/$2.log" 2>&1
  local status=$?
  if ((status == 0)) || ! grep -q "$3" "$dir/$2.log" || [[ -e $dir/$2.server && $1 == 0 ]]; then
    echo "no_launcher.sh: FAILED: rank $1 alone did not stop with '$3' and clean up (exit $status)"
    head -20 "$dir/$2.log"
    exit 1
  fi
  echo "no_launcher.sh: rank $1 alone stopped: $(grep -o "dist::init: rank $1 [^(]*" "$dir/$2.log" | head -1)"
}
alone 1 nobody "waited for rank 0's ompi-server address in .*nobody.server"
alone 0 lonely "rank 0 waited 3 s (KILN_DIST_TIMEOUT) for the other ranks of KILN_WORLD_SIZE=2 to join"
echo "no_launcher.sh: PASSED"
