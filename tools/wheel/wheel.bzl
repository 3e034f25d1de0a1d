"""ember_wheel: one reproducible wheel per package; ember_wheel_folder: all of them in one folder.

The version comes from the package's VERSION file at execution time, so the wheel (whose file name
holds the version) is written into a directory output: bazel-bin/packages/<pkg>/wheel/*.whl.
`bazel build //:wheels` copies all seven into bazel-bin/wheels/.
"""

load("@ember_python//:info.bzl", "ABI_TAG", "PLATFORM_TAG", "PYTHON_TAG")

def _archive_path(f, prefixes):
    path = f.short_path
    best = None
    for src in prefixes:
        if path.startswith(src) and (best == None or len(src) > len(best)):
            best = src
    if best == None:
        fail("%s is under none of %s" % (path, prefixes.keys()))
    return prefixes[best] + path[len(best):]

def _ember_wheel_impl(ctx):
    out = ctx.actions.declare_directory(ctx.label.name)
    files = []
    for f in ctx.files.srcs:
        if "/__pycache__/" in f.short_path or f.short_path.endswith(".pyc"):
            continue
        files.append([f.path, _archive_path(f, ctx.attr.prefixes)])
    siblings = []
    for target, dist in ctx.attr.siblings.items():
        siblings.append([target.files.to_list()[0].path, dist])
    native_code = ctx.attr.native
    manifest = ctx.actions.declare_file(ctx.label.name + ".manifest.json")
    ctx.actions.write(manifest, json.encode(struct(
        dist = ctx.attr.dist,
        version_file = ctx.file.version_file.path,
        files = files,
        requires = ctx.attr.requires,
        siblings = siblings,
        abi_version_file = ctx.file.abi_version_file.path if native_code else "",
        extras = ctx.attr.extras,
        entry_points = {"ember.components": ctx.attr.components} if ctx.attr.components else {},
        readme = ctx.file.readme.path,
        summary = ctx.attr.summary,
        tag = "%s-%s-%s" % (PYTHON_TAG, ABI_TAG, PLATFORM_TAG) if native_code else "py3-none-any",
        python_requires = ">=3.11",
        out_dir = out.path,
    )))
    inputs = ctx.files.srcs + [manifest, ctx.file.version_file, ctx.file.readme]
    inputs += [t.files.to_list()[0] for t in ctx.attr.siblings]
    if native_code:
        inputs.append(ctx.file.abi_version_file)
    ctx.actions.run(
        executable = ctx.executable._builder,
        arguments = [manifest.path],
        inputs = inputs,
        outputs = [out],
        mnemonic = "EmberWheel",
        progress_message = "Building wheel %s" % ctx.attr.dist,
    )
    return [DefaultInfo(files = depset([out]))]

ember_wheel = rule(
    implementation = _ember_wheel_impl,
    attrs = {
        "dist": attr.string(mandatory = True, doc = "distribution name, e.g. ember-core"),
        "summary": attr.string(mandatory = True),
        "version_file": attr.label(allow_single_file = True, mandatory = True),
        "readme": attr.label(allow_single_file = True, mandatory = True),
        "srcs": attr.label_list(allow_files = True),
        "prefixes": attr.string_dict(doc = "source path prefix -> path in the wheel"),
        "requires": attr.string_list(doc = "third-party Requires-Dist lines"),
        "extras": attr.string_list_dict(),
        "siblings": attr.label_keyed_string_dict(
            allow_files = True,
            doc = "sibling VERSION file -> dist name; pinned by compatible range",
        ),
        "native": attr.bool(doc = "has native code: platform tag + ember-stable-abi pin"),
        "abi_version_file": attr.label(
            allow_single_file = True,
            default = "//packages/stable_abi:VERSION",
        ),
        "components": attr.string_dict(doc = "entry points of group ember.components"),
        "_builder": attr.label(
            default = "//tools/wheel:build_wheel",
            executable = True,
            cfg = "exec",
        ),
    },
)

def _ember_wheel_folder_impl(ctx):
    out = ctx.actions.declare_directory(ctx.label.name)
    dirs = ctx.files.wheels
    ctx.actions.run_shell(
        inputs = dirs,
        outputs = [out],
        command = 'for d in "${@:2}"; do cp "$d"/*.whl "$1"/; done',
        arguments = [out.path] + [d.path for d in dirs],
        mnemonic = "EmberWheels",
        progress_message = "Collecting %d wheels into %s" % (len(dirs), out.short_path),
    )
    return [DefaultInfo(files = depset([out]))]

ember_wheel_folder = rule(
    implementation = _ember_wheel_folder_impl,
    attrs = {"wheels": attr.label_list(mandatory = True)},
)
