"""Finding the sidecar: explicit URL, else TOOLGATE_URL, else the socket if
it exists, else http://127.0.0.1:8181; a URL the client cannot read is an
error at construction naming the setting."""

from __future__ import annotations

import os
import unittest
from unittest import mock

import toolgate
from toolgate import _discover

from .support import ALLOW, TEST_PEER_PEM, BrokenPeer, http_answer, sample_bundle, start_class_sidecar, tls_server_context

BAD = [
    "ftp://host:1",
    "127.0.0.1:8181",
    "localhost",
    "unix://relative.sock",
    "unix:relative.sock",
    "unix:",
    "unix://",
    "http://",
    "http://:8181",
    "http://h:1/?q=1",
    "http://h:1/#f",
    "http://user:pw@h:1",
    "http://[::1",
    "http://h:99999",
    "http://h:port",
    "tcp://x",
]


class DiscoveryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.sc = start_class_sidecar(cls, sample_bundle())

    def client(self, *args, **kw) -> toolgate.Client:
        c = toolgate.Client(*args, **kw)
        self.addCleanup(c.close)
        return c

    def test_environment(self) -> None:
        with mock.patch.dict(os.environ, {"TOOLGATE_URL": self.sc.unix}):
            c = self.client()
            self.assertEqual(c.url, self.sc.unix)
            self.assertEqual(c.evaluate("Read", session_id="s").decision, "allow")
            # An explicit URL wins over the environment.
            self.assertEqual(self.client(self.sc.tcp).url, self.sc.tcp)
            self.assertEqual(self.client(self.sc.tcp).evaluate("Read", session_id="s").decision, "allow")

    def test_url_forms(self) -> None:
        path = self.sc.unix[len("unix://"):]
        host_port = self.sc.tcp[len("http://"):]
        for url, where in (
            ("unix:" + path, self.sc.unix),
            ("unix://" + path, self.sc.unix),
            (self.sc.tcp + "/", self.sc.tcp),
            ("http://localhost:" + host_port.rsplit(":", 1)[1], "http://localhost:" + host_port.rsplit(":", 1)[1]),
        ):
            with self.subTest(url):
                c = self.client(url)
                self.assertEqual(c.url, where)
                self.assertEqual(c.evaluate("Read", session_id="s").decision, "allow")

    def test_prefix(self) -> None:
        # A prefix goes before /v1/evaluate: the sidecar serves none, so its
        # 404 shows the path was used (and fails closed).
        c = self.client(self.sc.tcp + "/gate/")
        self.assertEqual(c.url, self.sc.tcp + "/gate")
        with self.assertLogs("toolgate"):
            res = c.evaluate("Read", session_id="s")
        self.assertEqual((res.decision, res.code), ("deny", toolgate.SIDECAR_UNAVAILABLE))
        self.assertIn("status 404", res.reason)

    def test_defaults(self) -> None:
        with mock.patch.dict(os.environ, {"TOOLGATE_URL": ""}):
            want = "unix://" + toolgate.DEFAULT_SOCKET if os.path.exists(toolgate.DEFAULT_SOCKET) else toolgate.DEFAULT_URL
            self.assertEqual(self.client().url, want)
            self.assertEqual(self.client("").url, want)
            # The socket, when it exists, comes before the port.
            with mock.patch.object(_discover, "DEFAULT_SOCKET", self.sc.unix[len("unix://"):]):
                self.assertEqual(self.client().url, self.sc.unix)
            with mock.patch.object(_discover, "DEFAULT_SOCKET", "/nonexistent/toolgate.sock"):
                self.assertEqual(self.client().url, "http://127.0.0.1:8181")
        with mock.patch.dict(os.environ):
            os.environ.pop("TOOLGATE_URL", None)
            with mock.patch.object(_discover, "DEFAULT_SOCKET", "/nonexistent/toolgate.sock"):
                self.assertEqual(self.client().url, "http://127.0.0.1:8181")

    def test_https(self) -> None:
        # The sidecar serves plain HTTP on loopback; https:// is for a
        # sidecar reached through a TLS proxy. The peer's certificate is
        # verified: trusted through SSL_CERT_FILE it answers, else the
        # client fails closed.
        peer = BrokenPeer(http_answer(200, ALLOW), tls=tls_server_context())
        self.addCleanup(peer.close)
        url = peer.url.replace("http://", "https://")
        with mock.patch.dict(os.environ, {"SSL_CERT_FILE": TEST_PEER_PEM}):
            c = self.client(url)
            for _ in range(3):
                res = c.evaluate("Read", session_id="s")
                self.assertEqual((res.decision, res.reason), ("allow", "ok"))
        self.assertEqual(peer.accepts, 1)
        with mock.patch.dict(os.environ, {"SSL_CERT_FILE": "/nonexistent.pem", "SSL_CERT_DIR": "/nonexistent"}):
            with self.assertLogs("toolgate"):
                res = self.client(url).evaluate("Read", session_id="s")
        self.assertEqual((res.decision, res.code), ("deny", toolgate.SIDECAR_UNAVAILABLE))
        self.assertIn("CERTIFICATE_VERIFY_FAILED", res.reason)

    def test_bad_urls_name_the_setting(self) -> None:
        for raw in BAD:
            with self.subTest(raw):
                with self.assertRaisesRegex(ValueError, r"Client\(url=\.\.\.\)"):
                    toolgate.Client(raw)
                with mock.patch.dict(os.environ, {"TOOLGATE_URL": raw}):
                    with self.assertRaisesRegex(ValueError, "TOOLGATE_URL"):
                        toolgate.Client()
                    # An explicit good URL does not read the variable.
                    self.assertEqual(self.client(self.sc.tcp).url, self.sc.tcp)

    def test_bad_arguments(self) -> None:
        with self.assertRaises(TypeError):
            toolgate.Client(8181)  # type: ignore[arg-type]
        for t in (0, -1, float("nan"), float("inf")):
            with self.subTest(timeout=t), self.assertRaisesRegex(ValueError, "timeout"):
                toolgate.Client(self.sc.tcp, timeout=t)
        for t in ("1", None, True):
            with self.subTest(timeout=t), self.assertRaisesRegex(TypeError, "timeout"):
                toolgate.Client(self.sc.tcp, timeout=t)  # type: ignore[arg-type]


if __name__ == "__main__":
    unittest.main()
