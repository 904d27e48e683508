"""A PEP 517 build backend in the standard library only, so
`pip install ./clients/python` needs no package index (not even setuptools):
the wheel is the toolgate package, py.typed included, and its metadata."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from typing import Any, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "toolgate"


def _project() -> Tuple[str, str, str, str]:
    """name, version, summary and requires-python from pyproject.toml (read
    with a regex: tomllib is 3.11+)."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    project = text.split("[project]", 1)[1].split("\n[", 1)[0]

    def field(key: str) -> str:
        m = re.search(r'^%s\s*=\s*"([^"]*)"' % re.escape(key), project, re.M)
        if m is None:
            raise RuntimeError("pyproject.toml: [project] has no %s" % key)
        return m.group(1)

    return field("name"), field("version"), field("description"), field("requires-python")


def _metadata() -> str:
    name, version, summary, python = _project()
    return (
        "Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\nRequires-Python: %s\n"
        "Classifier: Programming Language :: Python :: 3\nClassifier: Typing :: Typed\n" % (name, version, summary, python)
    )


def _wheel_meta() -> str:
    return "Wheel-Version: 1.0\nGenerator: toolgate_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _package_files() -> List[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, PACKAGE)):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if fn.endswith(".py") or fn == "py.typed":
                out.append(os.path.relpath(os.path.join(dirpath, fn), ROOT).replace(os.sep, "/"))
    return out


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _write_wheel(wheel_directory: str, files: Dict[str, bytes]) -> str:
    name, version, _, _ = _project()
    dist_info = "%s-%s.dist-info" % (name, version)
    files = dict(files)
    files[dist_info + "/METADATA"] = _metadata().encode()
    files[dist_info + "/WHEEL"] = _wheel_meta().encode()
    record = "".join("%s,%s,%d\n" % (path, _digest(data), len(data)) for path, data in files.items())
    record += dist_info + "/RECORD,,\n"
    files[dist_info + "/RECORD"] = record.encode()
    wheel_name = "%s-%s-py3-none-any.whl" % (name, version)
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            info = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return wheel_name


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    files = {}
    for rel in _package_files():
        with open(os.path.join(ROOT, rel), "rb") as f:
            files[rel] = f.read()
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                   metadata_directory: Optional[str] = None) -> str:
    # A .pth file putting the source directory on sys.path.
    return _write_wheel(wheel_directory, {"toolgate_editable.pth": (ROOT + "\n").encode()})


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    name, version, _, _ = _project()
    base = "%s-%s" % (name, version)
    sdist = base + ".tar.gz"
    paths = ["pyproject.toml", "_build/toolgate_build.py"] + _package_files()
    with tarfile.open(os.path.join(sdist_directory, sdist), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for rel in paths:
            t.add(os.path.join(ROOT, rel), arcname=base + "/" + rel, recursive=False)
        pkg_info = (_metadata()).encode()
        info = tarfile.TarInfo(base + "/PKG-INFO")
        info.size = len(pkg_info)
        t.addfile(info, io.BytesIO(pkg_info))
    return sdist


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []
