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
""".format(lib = libname))

tf_configure = repository_rule(
    implementation = _tf_configure_impl,
    environ = ["TF_HEADER_DIR", "TF_SHARED_LIBRARY_DIR", "TF_SHARED_LIBRARY_NAME"],
    local = True,
)
