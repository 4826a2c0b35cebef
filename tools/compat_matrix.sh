#!/usr/bin/env bash
# Builds and tests tf_rnn_ops against several TensorFlow releases, each in its own clone and
# virtual environment, and prints a table version x (build, XLA kernels, tests passed, tests
# failed, pip). The pip column: a second venv holding only that TensorFlow gets
# `pip install --no-build-isolation <clone>`, and tools/wheel_check.py --installed imports it from
# site-packages in another folder (every library, has_xla(), a Keras LSTM equal to stock's).
#   tools/compat_matrix.sh [VERSION ...]      default: 2.18.1 2.19.1 2.20.0 2.21.0 nightly
# "nightly" installs tf-nightly-cpu. Work happens under $TF_RNN_OPS_COMPAT_DIR (default: a
# temporary directory); logs stay there.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSIONS=("$@")
[ ${#VERSIONS[@]} -eq 0 ] && VERSIONS=(2.18.1 2.19.1 2.20.0 2.21.0 nightly)
WORK="${TF_RNN_OPS_COMPAT_DIR:-$(mktemp -d)}"
mkdir -p "$WORK"
declare -a ROWS
for v in "${VERSIONS[@]}"; do
  dir="$WORK/tf-$v"
  rm -rf "$dir"
  git clone -q "$ROOT" "$dir"
  log="$WORK/tf-$v.log"
  echo "[compat] TensorFlow $v in $dir (log: $log)"
  if [ "$v" = nightly ]; then
    env_args=(TF_RNN_OPS_TF_PACKAGE=tf-nightly-cpu)
  else
    env_args=(TF_RNN_OPS_TF_VERSION="$v")
  fi
  build="ok"; passed=0; failed=0; installed="?"; xla="-"; pip="-"
  if ! (cd "$dir" && env "${env_args[@]}" ./configure.sh) >"$log" 2>&1; then
    build="FAILED"
  else
    installed="$("$dir/.venv/bin/python" -c 'import tensorflow as tf; print(tf.__version__)' \
                 2>/dev/null | tail -1)"
    # The XLA kernels are a library of their own: "yes", or "no" (tf_rnn_ops.xla_status()
    # and build/xla_build.log say why).
    xla="$(cd "$dir" && .venv/bin/python -c 'import tf_rnn_ops; print("yes" if tf_rnn_ops.has_xla() else "no")' 2>/dev/null | tail -1)"
    (cd "$dir" && .venv/bin/python -m pytest -q tests -p no:cacheprovider) >>"$log" 2>&1
    summary="$(tail -1 "$log")"
    passed="$(grep -oE '[0-9]+ passed' <<<"$summary" | grep -oE '[0-9]+' || echo 0)"
    failed="$(grep -oE '[0-9]+ (failed|error)' <<<"$summary" | grep -oE '[0-9]+' \
              | paste -sd+ | bc 2>/dev/null || echo 0)"
    # The pip path, into a venv of its own that holds only this TensorFlow.
    pvenv="$WORK/tf-$v-pip-venv"
    rm -rf "$pvenv"
    if [ "$v" = nightly ]; then tf_req=tf-nightly-cpu; else tf_req="tensorflow-cpu==$v"; fi
    echo "[compat] TensorFlow $v: pip install --no-build-isolation into $pvenv"
    if { python3 -m venv "$pvenv" &&
         "$pvenv/bin/pip" install -q --disable-pip-version-check "$tf_req" &&
         "$pvenv/bin/pip" install --disable-pip-version-check --no-build-isolation "$dir" &&
         "$dir/.venv/bin/python" "$dir/tools/wheel_check.py" --installed "$pvenv/bin/python"
       } >"$WORK/tf-$v-pip.log" 2>&1; then
      pip="ok"
    else
      pip="FAILED"
    fi
  fi
  ROWS+=("$(printf '| %-8s | %-22s | %-6s | %-4s | %6s | %6s | %-6s |' "$v" "$installed" \
            "$build" "${xla:--}" "$passed" "${failed:-0}" "$pip")")
done
echo
echo "| asked    | installed              | build  | xla  | passed | failed | pip    |"
echo "|----------|------------------------|--------|------|--------|--------|--------|"
printf '%s\n' "${ROWS[@]}"
