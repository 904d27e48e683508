"""One kept-alive connection per thread, a reconnect when the sidecar
closed an idle one, and one client shared by threads."""

from __future__ import annotations

import threading
import time
import unittest

import toolgate
from toolgate import EvaluationMetadata

from .support import ALLOW, BrokenPeer, CountingProxy, http_answer, sample_bundle, start_class_sidecar, start_sidecar


class KeepAliveTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.sc = start_class_sidecar(cls, sample_bundle())

    def proxy(self, upstream: str, unix: bool) -> CountingProxy:
        p = CountingProxy(upstream, unix=unix)
        self.addCleanup(p.close)
        return p

    def test_one_connection_for_many_calls(self) -> None:
        for name, upstream, unix in (("tcp", self.sc.tcp, False), ("unix", self.sc.unix, True)):
            with self.subTest(name):
                p = self.proxy(upstream, unix)
                c = toolgate.Client(p.url)
                self.addCleanup(c.close)
                for i in range(100):
                    res = c.evaluate("Bash", session_id="s-1", agent_id="coder-1",
                                     metadata=EvaluationMetadata(input={"command": "rm -rf /" if i % 2 else "ls"}))
                    self.assertEqual(res.decision, "deny" if i % 2 else "allow")
                self.assertEqual(p.accepts, 1, "100 calls opened %d connections, want 1" % p.accepts)
                # close() drops it; the next call opens one more.
                c.close()
                self.assertEqual(c.evaluate("Read", session_id="s-1").decision, "allow")
                self.assertEqual(p.accepts, 2)

    def test_one_connection_per_thread(self) -> None:
        p = self.proxy(self.sc.unix, True)
        c = toolgate.Client(p.url)
        self.addCleanup(c.close)
        errors = []
        barrier = threading.Barrier(8)

        def calls(n: int) -> None:
            try:
                barrier.wait()
                for i in range(50):
                    amount = 100 * ((n + i) % 20)  # 0..1900: over 1000 asks, and a bundle file's sidecar cannot ask
                    res = c.evaluate("pay", session_id="s-%d" % n, agent_id="shop-agent",
                                     metadata=EvaluationMetadata(kwargs={"amount": amount}))
                    want = ("deny", "APPROVAL_UNAVAILABLE") if amount > 1000 else ("allow", None)
                    if (res.decision, res.code) != want:
                        errors.append((n, i, amount, res))
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=calls, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(p.accepts, 8, "8 threads opened %d connections, want one each" % p.accepts)

    def test_reconnects_after_the_sidecar_closed_an_idle_connection(self) -> None:
        sc = start_sidecar(self, sample_bundle(), args=["--idle-timeout", "150ms"])
        for name, upstream, unix in (("tcp", sc.tcp, False), ("unix", sc.unix, True)):
            with self.subTest(name):
                p = self.proxy(upstream, unix)
                c = toolgate.Client(p.url, timeout=2)
                self.addCleanup(c.close)
                self.assertEqual(c.evaluate("Read", session_id="s-1").decision, "allow")
                time.sleep(0.5)  # the sidecar closes the idle connection
                res = c.evaluate("Read", session_id="s-1")
                self.assertEqual((res.decision, res.code), ("allow", None), res.reason)
                self.assertEqual(p.accepts, 2)
                self.assertEqual(c.fail_open_count, 0)

    def test_reconnects_once_only(self) -> None:
        # A peer that answers the first request and then closes every
        # connection without answering: the call on the dropped kept-alive
        # connection is retried once, on a new connection, then fails closed.
        peer = BrokenPeer(http_answer(200, ALLOW), later=b"")
        self.addCleanup(peer.close)
        c = toolgate.Client(peer.url)
        self.addCleanup(c.close)
        self.assertEqual(c.evaluate("Read", session_id="s").decision, "allow")
        with self.assertLogs("toolgate"):
            res = c.evaluate("Read", session_id="s")
        self.assertEqual((res.decision, res.code), ("deny", toolgate.SIDECAR_UNAVAILABLE))
        self.assertIn("RemoteDisconnected", res.reason)
        self.assertEqual((peer.accepts, len(peer.requests)), (2, 3))

    def test_a_connection_the_answer_closes_is_not_reused(self) -> None:
        peer = BrokenPeer(http_answer(200, ALLOW, {"Connection": "close"}), close_after=True)
        self.addCleanup(peer.close)
        c = toolgate.Client(peer.url)
        self.addCleanup(c.close)
        for _ in range(3):
            self.assertEqual(c.evaluate("Read", session_id="s").decision, "allow")
        self.assertEqual((peer.accepts, len(peer.requests)), (3, 3))


if __name__ == "__main__":
    unittest.main()
