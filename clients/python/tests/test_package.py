"""The package builds, with the standard library only, into a wheel holding
every module, py.typed and its metadata (what `pip install ./clients/python`
installs)."""

from __future__ import annotations

import importlib.util
import os
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class PackageTest(unittest.TestCase):
    def test_wheel(self) -> None:
        spec = importlib.util.spec_from_file_location("toolgate_build", os.path.join(HERE, "_build", "toolgate_build.py"))
        backend = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(backend)  # type: ignore[union-attr]
        self.assertEqual(backend.get_requires_for_build_wheel(), [])
        with tempfile.TemporaryDirectory() as d:
            name = backend.build_wheel(d)
            self.assertEqual(name, "toolgate-0.1.0-py3-none-any.whl")
            with zipfile.ZipFile(os.path.join(d, name)) as z:
                names = set(z.namelist())
                meta = z.read("toolgate-0.1.0.dist-info/METADATA").decode()
                record = z.read("toolgate-0.1.0.dist-info/RECORD").decode()
        modules = {"toolgate/" + f for f in os.listdir(os.path.join(HERE, "toolgate")) if f.endswith(".py")}
        self.assertTrue(modules <= names, modules - names)
        self.assertIn("toolgate/py.typed", names)
        self.assertIn("Requires-Python: >=3.9", meta)
        self.assertNotIn("Requires-Dist", meta, "the client has no runtime dependency")
        for n in names:
            self.assertIn(n + ",", record)


if __name__ == "__main__":
    unittest.main()
