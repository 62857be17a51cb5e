"""A minimal PEP 517 backend (standard library only) for the pure-Python ccv1d package.

Builds a wheel of ccv1d/*.py (plus a libcausal_conv1d.so* placed in ccv1d/ before the build,
which then makes the wheel platform-specific) and an sdist. Metadata comes from pyproject.toml's
[project] table, read with a tiny parser for the keys used there (tomllib is 3.11+ only).
"""
import base64
import hashlib
import io
import os
import re
import sysconfig
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.abspath(__file__))
PKG = "ccv1d"


def _project():
    text = open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8").read()
    block = re.search(r"^\[project\]\n(.*?)(?=^\[|\Z)", text, re.S | re.M).group(1)
    return dict(re.findall(r'^(\w[\w-]*) = "([^"]*)"', block, re.M))


def _files():
    """(path in archive, path on disk) of the package."""
    out = []
    for name in sorted(os.listdir(os.path.join(ROOT, PKG))):
        if name.endswith(".py") or name.startswith("libcausal_conv1d.so"):
            out.append((f"{PKG}/{name}", os.path.join(ROOT, PKG, name)))
    return out


def _metadata(p):
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}",
             f"Summary: {p['description']}", f"Requires-Python: {p['requires-python']}",
             "Provides-Extra: numpy", 'Requires-Dist: numpy; extra == "numpy"',
             "Provides-Extra: torch", 'Requires-Dist: torch>=2.4; extra == "torch"',
             "Description-Content-Type: text/markdown", ""]
    readme = os.path.join(ROOT, "README.md")
    body = open(readme, encoding="utf-8").read() if os.path.exists(readme) else ""
    return "\n".join(lines) + "\n" + body


def _tag(files):
    if any("libcausal_conv1d.so" in a for a, _ in files):
        return "py3-none-" + re.sub(r"[-.]", "_", sysconfig.get_platform())
    return "py3-none-any"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    p = _project()
    files = _files()
    tag = _tag(files)
    dist = f"{p['name']}-{p['version']}"
    name = f"{dist}-{tag}.whl"
    record = []

    def add(zf, arc, data):
        zf.writestr(zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0)), data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{arc},sha256={digest},{len(data)}")

    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as zf:
        for arc, disk in files:
            with open(disk, "rb") as f:
                add(zf, arc, f.read())
        add(zf, f"{dist}.dist-info/METADATA", _metadata(p).encode())
        add(zf, f"{dist}.dist-info/WHEEL", (f"Wheel-Version: 1.0\nGenerator: ccv1d _build_backend\n"
                                            f"Root-Is-Purelib: {'true' if tag.endswith('any') else 'false'}\n"
                                            f"Tag: {tag}\n").encode())
        rec = f"{dist}.dist-info/RECORD"
        zf.writestr(zipfile.ZipInfo(rec, date_time=(2020, 1, 1, 0, 0, 0)), "\n".join(record + [f"{rec},,"]) + "\n")
    return name


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    dist = f"{p['name']}-{p['version']}"
    name = f"{dist}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tf:
        for rel in ["pyproject.toml", "_build_backend.py", "README.md"] + [a for a, _ in _files() if a.endswith(".py")]:
            tf.add(os.path.join(ROOT, rel), f"{dist}/{rel}")
        info = f"Metadata-Version: 2.1\nName: {p['name']}\nVersion: {p['version']}\n".encode()
        ti = tarfile.TarInfo(f"{dist}/PKG-INFO")
        ti.size = len(info)
        tf.addfile(ti, io.BytesIO(info))
    return name
