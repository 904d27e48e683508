"""The package builds through setuptools' standard PEP 517 backend, named in
pyproject.toml (offline: --no-build-isolation), into a wheel whose metadata
has the version, license, classifiers and urls, and which, installed alone
into a fresh venv, imports and decides against the real sidecar."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest
import zipfile

import toolgate

from .support import sample_bundle, start_sidecar

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class PackageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.mkdtemp(prefix="tgpy-pkg-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        # Built from a copy: setuptools leaves build/ and *.egg-info in the
        # source tree, and a stale build/ would put deleted modules in.
        src = os.path.join(cls.tmp, "src")
        shutil.copytree(HERE, src, ignore=shutil.ignore_patterns("__pycache__", "build", "dist", "*.egg-info"))
        out = os.path.join(cls.tmp, "dist")
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", src,
                        "-w", out], check=True)
        (name,) = os.listdir(out)
        cls.wheel = os.path.join(out, name)

    def test_wheel_metadata(self) -> None:
        self.assertEqual(os.path.basename(self.wheel), "toolgate-%s-py3-none-any.whl" % toolgate.__version__)
        with zipfile.ZipFile(self.wheel) as z:
            names = set(z.namelist())
            meta = z.read("toolgate-%s.dist-info/METADATA" % toolgate.__version__).decode()
        modules = {"toolgate/" + f for f in os.listdir(os.path.join(HERE, "toolgate")) if f.endswith(".py")}
        self.assertTrue(modules <= names, modules - names)
        self.assertIn("toolgate/py.typed", names)
        self.assertEqual({n for n in names if not n.startswith(("toolgate/", "toolgate-"))}, set(), "only the package")
        headers, _, readme = meta.partition("\n\n")
        lines = headers.splitlines()
        for want in ("Name: toolgate", "Version: " + toolgate.__version__, "License: Apache-2.0",
                     "Requires-Python: >=3.9", "Description-Content-Type: text/markdown",
                     "Classifier: License :: OSI Approved :: Apache Software License",
                     "Classifier: Typing :: Typed", "Classifier: Programming Language :: Python :: 3.9",
                     "Classifier: Programming Language :: Python :: 3.13",
                     "Project-URL: Homepage, https://github.com/toolgate/toolgate",
                     "Project-URL: Repository, https://github.com/toolgate/toolgate",
                     "Project-URL: Documentation, https://github.com/toolgate/toolgate/blob/main/clients/python/README.md"):
            self.assertIn(want, lines)
        self.assertFalse([x for x in lines if x.startswith("Requires-Dist")], "the client has no runtime dependency")
        self.assertTrue(readme.startswith("# toolgate for Python"), readme[:80])

    def test_wheel_installs_into_a_venv_and_decides(self) -> None:
        venv = os.path.join(self.tmp, "venv")
        # A plain venv (no system site-packages), filled by this pip
        # (--python): seeding the venv's own pip would take most of the test.
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
        py = os.path.join(venv, "bin", "python")
        subprocess.run([sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-deps", "--no-index",
                        self.wheel], check=True)
        sc = start_sidecar(self, sample_bundle())
        script = textwrap.dedent("""\
            import asyncio, sys, toolgate
            assert toolgate.__file__.startswith(sys.prefix), toolgate.__file__
            md = toolgate.EvaluationMetadata(input={"command": "rm -rf /"})
            res = toolgate.Client(sys.argv[1]).evaluate("Bash", metadata=md)
            ares = asyncio.run(toolgate.AsyncClient(sys.argv[1]).evaluate("Bash", metadata=md))
            print(toolgate.__version__, res.decision, res.matched_rule_id, ares.decision, ares.code)
            """)
        # Run from the venv, away from the source tree: only the installed
        # package can be imported.
        out = subprocess.run([py, "-c", script, sc.unix], cwd=self.tmp, check=True, capture_output=True, text=True)
        self.assertEqual(out.stdout, "%s deny no-rm-rf deny no-rm-rf\n" % toolgate.__version__, out.stderr)


if __name__ == "__main__":
    unittest.main()
