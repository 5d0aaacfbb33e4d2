#!/usr/bin/env bash
# OCI conformance: the validation programs of opencontainers/runtime-tools (commit 260e151)
# run against runc, crun and reprorun (debug build), and a table of the programs each one
# passes fully (exit 0 and no `not ok` line in its TAP output). Not part of the test suite.
#   sudo runtime-tests/bench/oci-validation.sh RUNTIME_TOOLS_DIR [OUT_DIR] [PROGRAM...]
# RUNTIME_TOOLS_DIR: a checkout (or `git archive`) of runtime-tools at 260e151; built here
# offline with its vendored modules (Go >= 1.19). OUT_DIR (default /tmp/oci-validation)
# keeps each program's TAP output as OUT_DIR/RUNTIME/NAME.tap. PROGRAMs (e.g. `hooks
# linux_sysctl`) restrict the run to those. Needs root, go, runc, crun.
# crun refuses this host's hybrid cgroup layout while /sys/fs/cgroup/unified is mounted, so
# the whole run is in a private mount namespace with it unmounted (the same for all three).
set -euo pipefail
rt=${1:?usage: $0 RUNTIME_TOOLS_DIR [OUT_DIR] [PROGRAM...]}
out=${2:-/tmp/oci-validation}
shift $(($# < 2 ? $# : 2))
source "$(dirname "$0")/lib.sh"
in_private_mount_ns "$rt" "$out" "$@"
need go runc crun timeout
rt=$(cd "$rt" && pwd)

"$root/.ci/musl"
(cd "$root" && cargo build --quiet)
bindir=$(mktemp -d)
trap 'rm -rf "$bindir"' EXIT
ln -s "$root/target/x86_64-unknown-linux-musl/debug/reprorun" "$bindir/reprorun"

(cd "$rt" && GOFLAGS=-mod=vendor GOPROXY=off make --quiet runtimetest validation-executables >/dev/null)

if [ $# -gt 0 ]; then
  programs=("$@")
else
  mapfile -t programs < <(cd "$rt/validation" && ls -d */ | tr -d / | grep -vx util)
fi
runtimes=(runc crun reprorun)
declare -A passed
for r in "${runtimes[@]}"; do passed[$r]=0; mkdir -p "$out/$r"; done

printf '%-40s' program
printf '%10s' "${runtimes[@]}"
echo
for p in "${programs[@]}"; do
  printf '%-40s' "$p"
  for r in "${runtimes[@]}"; do
    log="$out/$r/$p.tap"
    status=0
    (cd "$rt" && PATH="$bindir:$PATH" RUNTIME=$r timeout 120 "./validation/$p/$p.t") \
      >"$log" 2>&1 || status=$?
    if [ "$status" -eq 0 ] && grep -q '^ok' "$log" && ! grep -q '^not ok' "$log"; then
      passed[$r]=$((passed[$r] + 1))
      printf '%10s' pass
    else
      printf '%10s' FAIL
    fi
  done
  echo
done
printf '%-40s' "full passes (of ${#programs[@]})"
for r in "${runtimes[@]}"; do printf '%10s' "${passed[$r]}"; done
echo
