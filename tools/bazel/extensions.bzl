"""Bzlmod module extension (Bazel >= 7, MODULE.bazel): the same repositories as WORKSPACE.

Not exercised by CI (Bazel 4.2.3 has no Bzlmod); kept in step with WORKSPACE by hand.
"""

load(":python.bzl", "ember_pip_lock", "ember_python")

def _ember_deps_impl(_module_ctx):
    ember_python(name = "ember_python")
    ember_pip_lock(name = "pypi", lock = Label("//:requirements.lock"))

ember_deps = module_extension(implementation = _ember_deps_impl)
