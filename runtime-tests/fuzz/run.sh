#!/usr/bin/env bash
# Runs every cargo-fuzz target of reprorun's parsers for a bounded time each: the long,
# coverage-guided runs.
#
#   runtime-tests/fuzz/run.sh [SECONDS_PER_TARGET [LIBFUZZER_ARGS...]]     (default 60)
#   FUZZ_TARGETS="proxy_http elf" runtime-tests/fuzz/run.sh 600              (some targets only)
#
# Covered (spec/security.md "Fuzzing"; the checks are in oracles.rs):
#   bytes from inside the sandbox:
#     proxy_http      the egress proxy's request head, the head it sends upstream, body framing
#     proxy_socks     its SOCKS5 handshake (other first bytes, SOCKS4/4a, go the HTTP way)
#     proxy_sni       its reading of a tunnel's TLS ClientHello (the server name)
#     mirror_request  the mirror server's request head and the file it names
#     elf             the exec-time ELF reader (static? Go? runtime.cputicks?)
#   the caller's own input:
#     duration, bind, env, date, user_hostname, seccomp
#
# What CI runs instead: the test command (cargo test) has a stable fuzz pass,
# runtime-tests/fuzz_pass.rs, that runs every target's seeds, their prefixes and random
# mutations of them for 3 s each with the same checks (REPRORUN_FUZZ_SECONDS to change it,
# REPRORUN_FUZZ_SEED to replay a run). No nightly and no cargo-fuzz there.
#
# LIBFUZZER_ARGS go to every target after -max_total_time (e.g. -only_ascii=1, -jobs=2).
# Needs a nightly toolchain and cargo-fuzz:
#   rustup toolchain install nightly && cargo install cargo-fuzz
# Seeds come from runtime-tests/fuzz/seeds/TARGET (committed; tools/ made them from real
# clients and programs); corpora grow in
# runtime-tests/fuzz/corpus/TARGET, crashing inputs go to
# runtime-tests/fuzz/artifacts/TARGET, full logs to runtime-tests/fuzz/target/logs/TARGET.log.
# An input the stable pass saves (it prints the path) runs here with
#   cargo +nightly fuzz run --fuzz-dir runtime-tests/fuzz TARGET FILE
# and a crashing input found here, once fixed, joins the stable pass copied into seeds/TARGET.
# Exits 1 when any target crashed (or failed to build), 2 on a usage error.
set -euo pipefail

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $0 [SECONDS_PER_TARGET [LIBFUZZER_ARGS...]]  (seconds: a positive whole number; default 60)" >&2
    exit 2
fi
shift $(( $# > 0 ? 1 : 0 ))
extra=("$@")

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
fuzz_dir="runtime-tests/fuzz"

# Linking: the repository's .cargo/config.toml adds `-C target-feature=+crt-static` for the
# reprorun binary, but sanitizer builds must link dynamically. cargo-fuzz always sets RUSTFLAGS
# (sanitizer and coverage flags, plus any RUSTFLAGS of yours), and RUSTFLAGS replaces every
# config `rustflags`, so crt-static does not reach the fuzz build. A config file in
# runtime-tests/fuzz could not undo it: cargo joins `rustflags` arrays across config files, and
# `+crt-static` wins over a later `-crt-static`. CARGO_ENCODED_RUSTFLAGS would in turn replace
# cargo-fuzz's RUSTFLAGS, so drop it. (crates/runtime/build.rs builds crates/reprotime with RUSTFLAGS="" itself.)
unset CARGO_ENCODED_RUSTFLAGS

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "error: 'cargo +nightly fuzz' is not available." >&2
    echo "Install it with:  rustup toolchain install nightly && cargo install cargo-fuzz" >&2
    exit 1
fi

# The build is the same for every target: do it once, up front (CARGO_BUILD_JOBS is honoured).
targets=($(cargo +nightly fuzz list --fuzz-dir "$fuzz_dir"))
if [ -n "${FUZZ_TARGETS:-}" ]; then
    for t in $FUZZ_TARGETS; do
        if ! printf '%s\n' "${targets[@]}" | grep -qx -- "$t"; then
            echo "error: no fuzz target '$t' (FUZZ_TARGETS); targets: ${targets[*]}" >&2
            exit 2
        fi
    done
    targets=($FUZZ_TARGETS)
fi
if [ "${#targets[@]}" -eq 0 ]; then
    echo "error: no fuzz targets found in $fuzz_dir" >&2
    exit 1
fi
echo "== building ${#targets[@]} fuzz targets"
cargo +nightly fuzz build --fuzz-dir "$fuzz_dir"

log_dir="$fuzz_dir/target/logs"
mkdir -p "$log_dir"
summary=()
reproduce=()
failed=0
for t in "${targets[@]}"; do
    log="$log_dir/$t.log"
    echo "== fuzzing $t for ${seconds}s (log: $log)"
    status=0
    # timeout: a backstop in case libFuzzer overruns -max_total_time (e.g. a hung input).
    # Committed seed inputs (runtime-tests/fuzz/seeds/TARGET), if any, join the corpus.
    corpus=("$fuzz_dir/corpus/$t")
    mkdir -p "${corpus[0]}"
    if [ -d "$fuzz_dir/seeds/$t" ]; then
        corpus+=("$fuzz_dir/seeds/$t")
    fi
    timeout --kill-after=30 "$((seconds + 300))" \
        cargo +nightly fuzz run --fuzz-dir "$fuzz_dir" "$t" "${corpus[@]}" -- \
        -max_total_time="$seconds" -print_final_stats=1 ${extra[@]+"${extra[@]}"} >"$log" 2>&1 || status=$?
    runs="$(grep -oE '^Done [0-9]+ runs' "$log" | tail -n1 | awk '{print $2}' || true)"
    if [ -z "$runs" ]; then
        runs="$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | tail -n1 | grep -oE '[0-9]+$' || true)"
    fi
    runs="${runs:-?}"
    if [ "$status" -eq 0 ]; then
        result="no crash"
    else
        failed=1
        artifact="$(grep -oE 'Test unit written to [^ ]+' "$log" | tail -n1 | sed 's/^Test unit written to //' || true)"
        if [ -n "$artifact" ]; then
            result="CRASH (exit $status), input: $artifact"
            # (cargo-fuzz's own hint leaves out --fuzz-dir, since this one also ends in "fuzz".)
            reproduce+=("RUST_BACKTRACE=1 cargo +nightly fuzz run --fuzz-dir $fuzz_dir $t $artifact")
        elif [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
            result="TIMED OUT (exit $status)"
        else
            result="FAILED (exit $status), see $log"
        fi
        echo "---- last lines of $log:"
        tail -n 40 "$log"
    fi
    line="$(printf '%-14s %12s executions  %s' "$t" "$runs" "$result")"
    summary+=("$line")
    echo "$line"
done

echo
echo "== summary (${seconds}s per target)"
printf '%s\n' "${summary[@]}"
if [ "${#reproduce[@]}" -gt 0 ]; then
    echo
    echo "== reproduce (from the repository root)"
    printf '%s\n' "${reproduce[@]}"
fi
exit "$failed"
