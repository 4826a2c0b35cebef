"""Build macros for tf_rnn_ops: one place for the flags every op-library target uses."""

# Flags for all C++ in the op library. TensorFlow's own compile flags (ABI, C++17, Eigen
# alignment) come from tf.sysconfig through .bazelrc (written by configure.sh). The pip wheel
# of TensorFlow assumes AVX, so AVX is the baseline here too.
TFRNN_COPTS = [
    "-pthread",
    "-fPIC",
    "-mavx",
    "-DEIGEN_USE_THREADS",
]

# Warnings the engine's builds leave out: GCC 12 reports '__Y' in its own avx512fintrin.h as
# "may be used uninitialized" wherever Eigen's AVX-512 bfloat16 conversions
# (_mm512_cvtepu16_epi32 on an undefined operand) are inlined: megabytes of stderr per source
# file, past Bazel's limit for an action's output, which then hides every other warning.
ENGINE_WARNING_COPTS = ["-Wno-maybe-uninitialized"]

def tfrnn_cc_library(name, copts = [], **kwargs):
    native.cc_library(name = name, copts = TFRNN_COPTS + copts, **kwargs)

def custom_op_library(name, srcs = [], deps = [], copts = [], linkopts = [], **kwargs):
    """A shared library loadable with tf.load_op_library."""
    native.cc_binary(
        name = name,
        srcs = srcs,
        deps = deps + [
            "@local_config_tf//:tf_header_lib",
            "@local_config_tf//:libtensorflow_framework",
        ],
        copts = TFRNN_COPTS + copts,
        linkopts = linkopts + ["-pthread", "-Wl,--no-undefined-version"],
        linkshared = 1,
        **kwargs
    )

def engine_library(name, srcs, isa, isa_copts):
    """One ISA variant of the TensorFlow-free engine as a self-contained shared object.

    Hidden visibility keeps every symbol (ours and Eigen's template instances) local to the
    variant, so variants compiled with different -m flags never replace each other's code.
    Only tfrnn_engine_api() is exported.
    """
    native.cc_binary(
        name = name,
        srcs = srcs,
        deps = ["@local_config_tf//:eigen"],
        copts = [
            "-pthread",
            "-fPIC",
            "-DEIGEN_USE_THREADS",
            "-fvisibility=hidden",
            "-fvisibility-inlines-hidden",
            "-DTFRNN_ISA_NAME=\\\"%s\\\"" % isa,
        ] + ENGINE_WARNING_COPTS + isa_copts,
        linkopts = ["-pthread", "-Wl,--exclude-libs,ALL"],
        linkshared = 1,
    )
