"""Build one reproducible wheel from a JSON manifest (run by the ember_wheel Bazel rule).

Reproducible: entries sorted, fixed timestamps (SOURCE_DATE_EPOCH-style constant), fixed
permissions, no paths from the build machine; the same inputs give byte-identical wheels after
`bazel clean` and from any checkout path.

Manifest keys: dist, version_file, files [[src, dest]], requires (third-party Requires-Dist lines),
siblings [[version_file, dist]] (pinned by compatible range), abi_version_file (native wheels pin
ember-stable-abi to its major), extras {extra: [req]}, entry_points {group: {name: value}},
readme, summary, tag (e.g. py3-none-any), python_requires, out_dir.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import sys
import zipfile

# 1980-01-01 is the earliest time a zip can hold; any constant works.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def read_version(path: str) -> str:
    with open(path) as f:
        version = f.read().strip()
    if not re.fullmatch(r"\d+\.\d+\.\d+([ab]|rc)?\d*(\.dev\d+)?", version):
        raise SystemExit(f"{path}: not a version: {version!r}")
    return version


def compatible_range(version: str) -> str:
    """`>=X.Y.Z,<next`: next minor for 0.x (breaking changes allowed there), next major after."""
    major, minor = (int(p) for p in version.split(".")[:2])
    upper = f"{major}.{minor + 1}" if major == 0 else f"{major + 1}"
    return f">={version},<{upper}"


def normalize_dist(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def metadata(m: dict, version: str) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {m['dist']}",
        f"Version: {version}",
        f"Summary: {m['summary']}",
        "License: BSD-3-Clause",
        f"Requires-Python: {m['python_requires']}",
    ]
    reqs = list(m["requires"])
    for vfile, dist in m["siblings"]:
        reqs.append(dist + compatible_range(read_version(vfile)))
    if m.get("abi_version_file"):
        abi_major = int(read_version(m["abi_version_file"]).split(".")[0])
        reqs.append(f"ember-stable-abi>={abi_major},<{abi_major + 1}")
    lines += [f"Requires-Dist: {r}" for r in sorted(set(reqs))]
    for extra in sorted(m["extras"]):
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in m["extras"][extra]]
    lines.append("Description-Content-Type: text/markdown")
    with open(m["readme"], encoding="utf-8") as f:
        body = f.read()
    return "\n".join(lines) + "\n\n" + body


def entry_points(eps: dict) -> str:
    out = []
    for group in sorted(eps):
        out.append(f"[{group}]")
        out += [f"{name} = {value}" for name, value in sorted(eps[group].items())]
        out.append("")
    return "\n".join(out)


def add(zf: zipfile.ZipFile, name: str, data: bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = ((0o100755 if executable else 0o100644) & 0xFFFF) << 16
    info.create_system = 3  # unix, whatever the build host
    zf.writestr(info, data, compresslevel=9)


def build(m: dict) -> str:
    version = read_version(m["version_file"])
    dist = normalize_dist(m["dist"])
    distinfo = f"{dist}-{version}.dist-info"
    entries: dict[str, tuple[bytes, bool]] = {}
    for src, dest in m["files"]:
        if dest in entries:
            raise SystemExit(f"{m['dist']}: two files map to {dest}")
        with open(src, "rb") as f:
            entries[dest] = (f.read(), dest.endswith(".so"))
    wheel_txt = (
        "Wheel-Version: 1.0\nGenerator: ember tools/wheel\n"
        f"Root-Is-Purelib: {'true' if m['tag'].endswith('-none-any') else 'false'}\n"
        f"Tag: {m['tag']}\n"
    )
    entries[f"{distinfo}/METADATA"] = (metadata(m, version).encode(), False)
    entries[f"{distinfo}/WHEEL"] = (wheel_txt.encode(), False)
    eps = {g: dict(v) for g, v in m["entry_points"].items()}
    for group in eps:
        for name, value in list(eps[group].items()):
            # A component whose code is not written yet gets no entry point: core would fail
            # to import loading it. The wheel still installs (and `ember.<sub>` says it is absent).
            target = value.split(":")[0].replace(".", "/") + ".py"
            if target not in entries:
                print(f"{m['dist']}: no {target}: entry point {group}:{name} left out")
                del eps[group][name]
    eps = {g: v for g, v in eps.items() if v}
    if eps:
        entries[f"{distinfo}/entry_points.txt"] = (entry_points(eps).encode(), False)
    top = sorted(
        {d.split("/", 1)[0].removesuffix(".py") for d in entries if "/" in d or d.endswith(".py")}
        - {distinfo}
    )
    entries[f"{distinfo}/top_level.txt"] = (("\n".join(top) + "\n").encode(), False)

    record = [
        f"{name},{record_hash(data)},{len(data)}" for name, (data, _) in sorted(entries.items())
    ]
    record.append(f"{distinfo}/RECORD,,")
    name = f"{dist}-{version}-{m['tag']}.whl"
    os.makedirs(m["out_dir"], exist_ok=True)
    path = os.path.join(m["out_dir"], name)
    with zipfile.ZipFile(path, "w") as zf:
        # dist-info last, as the wheel spec recommends; everything else sorted.
        for key in sorted(entries, key=lambda k: (k.startswith(distinfo), k)):
            add(zf, key, *entries[key])
        add(zf, f"{distinfo}/RECORD", ("\n".join(record) + "\n").encode())
    return path


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        build(json.load(f))
