#!/usr/bin/env bash
# Every ember test, from a fresh Debian/Ubuntu machine: installs what it needs (Bazel included),
# then runs, uncached:
#   1. wheel reproducibility, part 1: build //:wheels, record sha256, `bazel clean`
#   2. bazel test //...            every package's tests, tools' tests, tests/ from source
#   3. wheel reproducibility, part 2: the wheels rebuilt by step 2 have the same sha256
#      (editing sources while this runs makes that check fail: CI runs on a clean clone)
#   4. ci/check_wheels.py          wheel subsets in fresh venvs, tests/ against installed wheels
#   5. ci/check_abi_compat.py      the example extension, built once, on current/bumped/older cores
# and ends with one line `N passed, N failed` summing every test it ran (skips on the line above).
# Exit status: non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
START=$(date +%s)
OUT=$ROOT/ci-out
rm -rf "$OUT" && mkdir -p "$OUT"

log() { printf '\n==== %s (%ss)\n' "$*" "$(($(date +%s) - START))"; }

# --- what this needs: Bazel 4 (Debian's bazel-bootstrap), a C++ compiler, Python >= 3.11 with venv.
SUDO=""
[[ $(id -u) != 0 ]] && SUDO="sudo"
apt_install() {
    log "installing $* (apt)"
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}
command -v bazel >/dev/null || apt_install bazel-bootstrap
command -v g++ >/dev/null || apt_install g++
PY=${EMBER_PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "ember needs Python >= 3.11 as python3 (or set EMBER_PYTHON): found $("$PY" --version 2>&1)"
    exit 1
fi
"$PY" -c 'import ensurepip, venv' 2>/dev/null || apt_install python3-venv python3-pip

BAZEL_FLAGS=""
[[ ${CI:-} == true ]] && BAZEL_FLAGS="--config=ci"
export BAZEL_FLAGS

log "wheels: build, record sha256, bazel clean"
ci/check_repro.sh before "$OUT"
repro_before=$?

log "bazel test //... --nocache_test_results"
bazel test $BAZEL_FLAGS --nocache_test_results //...
bazel_rc=$?
TESTLOGS=$(bazel info $BAZEL_FLAGS bazel-testlogs)
bazel query 'tests(//...)' --output=xml >"$OUT/test-targets.xml" 2>"$OUT/test-targets.err"

log "wheels: rebuilt after clean, same sha256?"
repro_rc=$repro_before
[[ $repro_before == 0 ]] && { ci/check_repro.sh after "$OUT"; repro_rc=$?; }

log "wheel subsets in fresh venvs (ci/check_wheels.py)"
"$PY" ci/check_wheels.py --wheels "$(bazel info $BAZEL_FLAGS bazel-bin)/wheels" --out "$OUT/subsets"
subsets_rc=$?

log "stable ABI: one extension wheel on three cores (ci/check_abi_compat.py)"
"$PY" ci/check_abi_compat.py --wheels "$(bazel info $BAZEL_FLAGS bazel-bin)/wheels" --out "$OUT/abi"
abi_rc=$?

[[ ${CI:-} == true ]] && bazel shutdown
log "summary"
"$PY" tools/summarize_tests.py --since "$START" \
    --timings "$TESTLOGS" --targets "$OUT/test-targets.xml" \
    --step "bazel-test=$bazel_rc:$TESTLOGS" \
    --step "wheels-reproducible=$repro_rc:$OUT/repro.xml" \
    --step "wheel-subsets=$subsets_rc:$OUT/subsets" \
    --step "abi-compat=$abi_rc:$OUT/abi"
