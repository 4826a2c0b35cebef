# Sourced by tools/build_cuda.sh (nvcc) and tools/build_cuda_emu.sh (g++, CUDA emulation): the
# one list of the CUDA engine's sources (cc/gpu/SOURCES) and the rule for when an object is out
# of date. Expects ROOT (the repository root) to be set and the working directory to be ROOT.

# cuda_sources: fills the array CUDA_SRCS from cc/gpu/SOURCES (blank lines and # comments
# skipped).
cuda_sources() {
  CUDA_SRCS=()
  local line
  while IFS= read -r line || [ -n "$line" ]; do
    line="${line%%#*}"
    line="${line//[[:space:]]/}"
    [ -n "$line" ] && CUDA_SRCS+=("$line")
  done < "$ROOT/cc/gpu/SOURCES"
  [ "${#CUDA_SRCS[@]}" -gt 0 ] || { echo "cc/gpu/SOURCES lists no sources" >&2; return 1; }
}

# The compiler's identity goes into each object's command record, so that another compiler
# version at the same path rebuilds everything. Set by cuda_compiler_id.
CUDA_COMPILER_ID=""

# cuda_compiler_id COMPILER: sets CUDA_COMPILER_ID from COMPILER --version.
cuda_compiler_id() {
  CUDA_COMPILER_ID="$("$1" --version 2>/dev/null | tr '\n' ' ')"
}

# cuda_object_stale OBJ COMMAND...: true (0) when OBJ must be compiled again: OBJ, its
# dependency file OBJ.d (written by the compiler's -MMD -MF) or its command record OBJ.cmd is
# missing, the compiler or command that built it differs from this one (flags changed), or a
# file named in OBJ.d (the source and every header it included) is missing or newer than OBJ.
cuda_object_stale() {
  local obj="$1" dep; shift
  [ -f "$obj" ] && [ -f "$obj.d" ] && [ -f "$obj.cmd" ] || return 0
  [ "$(cat "$obj.cmd")" = "$CUDA_COMPILER_ID|$*" ] || return 0
  # Make syntax: "target: dep dep \" continued over lines; drop the target and the backslashes.
  for dep in $(sed -e '1s/^[^:]*:[[:space:]]*//' -e 's/\\$//' "$obj.d"); do
    [ -e "$dep" ] || return 0
    [ "$dep" -nt "$obj" ] && return 0
  done
  return 1
}

# Compiles run in the background, at most CUDA_JOBS at once (TF_RNN_OPS_BUILD_JOBS, else one
# per CPU): cuda_compile_bg starts one when a slot is free, cuda_wait_objects waits for them all
# and fails when an object has no command record (its compile failed).
CUDA_JOBS="${TF_RNN_OPS_BUILD_JOBS:-$(nproc 2>/dev/null || echo 1)}"

# cuda_compile_bg OBJ COMMAND...: cuda_compile in the background once a slot is free.
cuda_compile_bg() {
  while [ "$(jobs -rp | wc -l)" -ge "$CUDA_JOBS" ]; do wait -n || true; done
  cuda_compile "$@" &
}

# cuda_wait_objects OBJ...: waits for every compile; 1 (naming the objects) when one failed.
cuda_wait_objects() {
  wait || true
  local obj failed=()
  for obj in "$@"; do [ -f "$obj.cmd" ] || failed+=("$obj"); done
  [ "${#failed[@]}" -eq 0 ] || { echo "compiling failed: ${failed[*]}" >&2; return 1; }
}

# cuda_compile OBJ COMMAND...: runs COMMAND (a compiler call that writes OBJ and, with
# -MMD -MF OBJ.d, its dependency file), then records the compiler and COMMAND in OBJ.cmd. A
# failed compile leaves no record, so the next run compiles the object again.
cuda_compile() {
  local obj="$1"; shift
  rm -f "$obj" "$obj.cmd"
  "$@"
  printf '%s\n' "$CUDA_COMPILER_ID|$*" > "$obj.cmd"
}
