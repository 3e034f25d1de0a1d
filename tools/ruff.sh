#!/usr/bin/env bash
# The ruff pinned in requirements.lock (installed by Bazel into @pypi), run in the workspace.
#   bazel run //tools:ruff -- check .      bazel run //tools:ruff -- format .
set -euo pipefail
here=${RUNFILES_DIR:-$0.runfiles}
ruff=$here/pypi/site/bin/ruff
[[ -x $ruff ]] || ruff=$(cd "$(dirname "$0")" && pwd)/ruff.runfiles/pypi/site/bin/ruff
cd "${BUILD_WORKSPACE_DIRECTORY:-.}"
exec "$ruff" "$@"
