"""Repository rule exposing the installed TensorFlow's headers and framework library.

configure.sh writes TF_HEADER_DIR, TF_SHARED_LIBRARY_DIR and TF_SHARED_LIBRARY_NAME
(taken from tf.sysconfig) into .bazelrc as --repo_env values.
"""

def _tf_configure_impl(ctx):
    env = ctx.os.environ
    for key in ["TF_HEADER_DIR", "TF_SHARED_LIBRARY_DIR", "TF_SHARED_LIBRARY_NAME"]:
        if key not in env:
            fail("%s is not set: run ./configure.sh first" % key)
    ctx.symlink(env["TF_HEADER_DIR"], "include")
    libname = env["TF_SHARED_LIBRARY_NAME"]
    ctx.symlink(env["TF_SHARED_LIBRARY_DIR"] + "/" + libname, libname)

    # The XLA kernels (cc/xla) also link libtensorflow_cc, which exports tf2xla and XLA; a
    # wheel without it gets an empty stand-in, and tools/build.sh reports XLA support off.
    cc_lib = env["TF_SHARED_LIBRARY_DIR"] + "/libtensorflow_cc.so.2"
    if ctx.path(cc_lib).exists:
        ctx.symlink(cc_lib, "libtensorflow_cc.so.2")
    else:
        ctx.file("libtensorflow_cc.so.2", "")
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "tf_header_lib",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.inc",
                 "include/Eigen/**", "include/unsupported/**",
                 "include/third_party/eigen3/**"], allow_empty = True),
    includes = ["include"],
)

cc_library(
    name = "eigen",
    hdrs = glob(["include/Eigen/**", "include/unsupported/**"], allow_empty = True),
    includes = ["include"],
)

cc_library(
    name = "libtensorflow_framework",
    srcs = ["{lib}"],
)

# The headers of tf2xla and XLA need the include roots of their bundled dependencies.
cc_library(
    name = "xla_header_lib",
    hdrs = glob(["include/external/**/*.def"], allow_empty = True),
    includes = [
        "include/external/farmhash_archive/src",
        "include/external/highwayhash",
        "include/external/llvm-project/llvm/include",
        "include/external/llvm-project/mlir/include",
    ],
    deps = [":tf_header_lib"],
)

cc_library(
    name = "libtensorflow_cc",
    srcs = ["libtensorflow_cc.so.2"],
)
""".format(lib = libname))

tf_configure = repository_rule(
    implementation = _tf_configure_impl,
    environ = ["TF_HEADER_DIR", "TF_SHARED_LIBRARY_DIR", "TF_SHARED_LIBRARY_NAME"],
    local = True,
)
