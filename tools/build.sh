#!/usr/bin/env bash
# Builds the op library with Bazel and places it (with its build info) in the package,
# so that `import tf_rnn_ops` works from the repository root. Needs ./configure.sh first.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
[ -f .bazelrc ] || { echo "build.sh: run ./configure.sh first" >&2; exit 1; }
start=$(date +%s)
bazel build //cc:_tf_rnn_ops.so //tf_rnn_ops:build_info "$@"
install -m 644 bazel-bin/cc/_tf_rnn_ops.so tf_rnn_ops/_tf_rnn_ops.so
install -m 644 bazel-bin/tf_rnn_ops/_build_info.txt tf_rnn_ops/_build_info.txt
echo "[build] op library built in $(( $(date +%s) - start )) s -> tf_rnn_ops/_tf_rnn_ops.so"
