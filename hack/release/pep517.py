"""Build a Python project's sdist and wheel into a directory through the
PEP 517 hooks its pyproject.toml names ([build-system] build-backend and
backend-path), with pip's vendored pyproject_hooks, the library pip and
`python -m build` call them with. No build isolation: no package index is
reachable, so the backend's requirements must already be installed, and a
missing one fails here, saying which.

usage: python3 pep517.py SOURCE_DIR OUT_DIR
"""

import importlib.metadata
import os
import sys

try:
    import tomllib
except ImportError:  # Python < 3.11: the copy pip vendors
    from pip._vendor import tomli as tomllib

from pip._vendor.packaging.requirements import Requirement
from pip._vendor.pyproject_hooks import BuildBackendHookCaller


def main(source, out):
    with open(os.path.join(source, "pyproject.toml"), "rb") as f:
        build_system = tomllib.load(f).get("build-system", {})
    # PEP 517: without build-backend, setuptools' legacy backend.
    backend = build_system.get("build-backend", "setuptools.build_meta:__legacy__")
    for req in build_system.get("requires", ["setuptools>=40.8.0"]):
        check_installed(Requirement(req))
    hooks = BuildBackendHookCaller(source, backend, backend_path=build_system.get("backend-path"))
    os.makedirs(out, exist_ok=True)
    print(hooks.build_sdist(out))
    print(hooks.build_wheel(out))


def check_installed(req):
    try:
        version = importlib.metadata.version(req.name)
    except importlib.metadata.PackageNotFoundError:
        sys.exit("the build backend needs %s, which is not installed (no package index to fetch it from)" % req)
    if not req.specifier.contains(version, prereleases=True):
        sys.exit("the build backend needs %s, installed: %s" % (req, version))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
