#!/usr/bin/env bash
# Wheels are reproducible: `bazel build //:wheels`, sha256, `bazel clean`, build again, compare.
# Usage: ci/check_repro.sh before OUT_DIR   (build + record + clean)
#        ci/check_repro.sh after OUT_DIR    (build + compare; writes OUT_DIR/repro.xml)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=$1 out=$2
mkdir -p "$out"
bazel build ${BAZEL_FLAGS:-} //:wheels
wheels=$(bazel info ${BAZEL_FLAGS:-} bazel-bin)/wheels
if [[ $mode == before ]]; then
    (cd "$wheels" && sha256sum *.whl) > "$out/wheels.sha256"
    cat "$out/wheels.sha256"
    bazel clean ${BAZEL_FLAGS:-}
    exit 0
fi
n=$(wc -l < "$out/wheels.sha256")
if (cd "$wheels" && sha256sum *.whl) | diff "$out/wheels.sha256" - && [[ $n == 7 ]]; then
    echo "wheels reproducible across bazel clean: $n sha256 sums identical"
    echo '<testsuite name="wheels-reproducible" tests="1" failures="0" errors="0" skipped="0"/>' > "$out/repro.xml"
else
    echo "wheels NOT reproducible across bazel clean (or not 7 wheels: $n)"
    echo '<testsuite name="wheels-reproducible" tests="1" failures="1" errors="0" skipped="0"/>' > "$out/repro.xml"
    exit 1
fi
