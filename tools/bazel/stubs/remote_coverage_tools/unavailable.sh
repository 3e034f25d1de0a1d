#!/bin/sh
echo "bazel coverage is unavailable offline in ember; use pytest-cov" >&2
exit 1
