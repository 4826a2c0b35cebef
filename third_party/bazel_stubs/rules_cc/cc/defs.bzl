# Offline stand-in for @rules_cc: Bazel 4's @bazel_tools loads these names from
# @rules_cc, which cannot be downloaded here. They re-export the native rules.
cc_library = native.cc_library
cc_binary = native.cc_binary
cc_test = native.cc_test
cc_import = native.cc_import
cc_toolchain = native.cc_toolchain
cc_toolchain_suite = native.cc_toolchain_suite
