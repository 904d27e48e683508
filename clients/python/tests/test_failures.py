"""Fail closed: every way the sidecar can give no decision is a deny with
SIDECAR_UNAVAILABLE, never an exception; fail_open allows and counts."""

from __future__ import annotations

import logging
import threading
import time
import unittest

import toolgate
from toolgate import SIDECAR_UNAVAILABLE, EvaluationMetadata

from .support import ALLOW, BrokenPeer, http_answer, sample_bundle, start_sidecar

RM_RF = EvaluationMetadata(input={"command": "rm -rf /"})


def quiet(test: unittest.TestCase) -> None:
    """The client logs every fail-closed deny; keep the test output clean."""
    log = logging.getLogger("toolgate")
    test.addCleanup(log.setLevel, log.level)
    log.setLevel(logging.CRITICAL)


class SidecarGoneTest(unittest.TestCase):
    def setUp(self) -> None:
        quiet(self)

    def test_killed_mid_run_fails_closed(self) -> None:
        sc = start_sidecar(self, sample_bundle())
        clients = {}
        for url in (sc.tcp, sc.unix):
            c = toolgate.Client(url)
            self.addCleanup(c.close)
            self.assertEqual(c.evaluate("Read", session_id="s-1", agent_id="coder-1").decision, "allow", url)
            clients[url] = c
        sc.kill()  # SIGKILL, with the clients' kept-alive connections open
        for url, c in clients.items():
            with self.subTest(url):
                for _ in range(2):  # on the dead kept-alive connection, then on a new one
                    start = time.monotonic()
                    res = c.evaluate("Read", session_id="s-1", agent_id="coder-1")
                    self.assertLess(time.monotonic() - start, 2)
                    self.assertEqual((res.decision, res.code, res.effect), ("deny", SIDECAR_UNAVAILABLE, "deny"))
                    self.assertIn(url, res.reason)
                    self.assertIn("fail closed", res.reason)
                self.assertEqual(c.fail_open_count, 0)

    def test_unreachable_fails_closed(self) -> None:
        for url in ("http://127.0.0.1:1", "unix:///tmp/tgpy-no-such-dir/s.sock"):
            with self.subTest(url):
                res = toolgate.Client(url).evaluate("Read", session_id="s-1")
                self.assertEqual((res.decision, res.code), ("deny", SIDECAR_UNAVAILABLE))

    def test_fail_closed_is_logged(self) -> None:
        logging.getLogger("toolgate").setLevel(logging.NOTSET)
        with self.assertLogs("toolgate", logging.WARNING) as logs:
            toolgate.Client("http://127.0.0.1:1").evaluate("Bash", session_id="s-1")
        self.assertIn("Bash denied (fail closed)", logs.output[0])

    def test_fail_open_counts(self) -> None:
        sc = start_sidecar(self, sample_bundle())
        c = toolgate.Client(sc.unix, fail_open=True)
        self.addCleanup(c.close)
        # A deny the sidecar makes is never overridden by fail_open.
        res = c.evaluate("Bash", session_id="s-1", agent_id="coder-1", metadata=RM_RF)
        self.assertEqual((res.decision, res.code), ("deny", "no-rm-rf"))
        self.assertEqual(c.fail_open_count, 0)
        sc.kill()
        logging.getLogger("toolgate").setLevel(logging.NOTSET)
        for i in (1, 2, 3):
            with self.assertLogs("toolgate", logging.WARNING) as logs:
                res = c.evaluate("Bash", session_id="s-1", agent_id="coder-1", metadata=RM_RF)
            self.assertEqual((res.decision, res.code, res.effect), ("allow", SIDECAR_UNAVAILABLE, "allow"))
            self.assertIn("fail open", res.reason)
            self.assertIn("allowed (fail open)", logs.output[0])
            self.assertEqual(c.fail_open_count, i)

    def test_fail_open_count_is_thread_safe(self) -> None:
        c = toolgate.Client("http://127.0.0.1:1", fail_open=True)

        def calls() -> None:
            for _ in range(50):
                assert c.evaluate("Read", session_id="s").decision == "allow"

        threads = [threading.Thread(target=calls) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(c.fail_open_count, 400)


class TimeoutTest(unittest.TestCase):
    def setUp(self) -> None:
        quiet(self)

    def test_no_answer_within_the_timeout(self) -> None:
        for unix in (False, True):
            with self.subTest(unix=unix):
                peer = BrokenPeer(None, unix=unix)  # accepts, reads, never answers
                self.addCleanup(peer.close)
                c = toolgate.Client(peer.url, timeout=0.2)
                self.addCleanup(c.close)
                for _ in range(2):  # the second on a new connection: no hang either
                    start = time.monotonic()
                    res = c.evaluate("Read", session_id="s-1")
                    took = time.monotonic() - start
                    self.assertGreaterEqual(took, 0.19)
                    self.assertLess(took, 0.6, "a timeout must not be retried past its budget")
                    self.assertEqual((res.decision, res.code), ("deny", SIDECAR_UNAVAILABLE))
                    self.assertIn("no answer within 0.2s", res.reason)
                self.assertEqual(len(peer.requests), 2, "one request per call: a timeout is never retried")

    def test_a_trickled_answer_is_bound_by_the_timeout(self) -> None:
        # Every read gets a byte well within the timeout, the whole answer
        # would take seconds: the call still ends at its timeout.
        peer = BrokenPeer(http_answer(200, ALLOW), trickle=0.02)
        self.addCleanup(peer.close)
        c = toolgate.Client(peer.url, timeout=0.3)
        self.addCleanup(c.close)
        start = time.monotonic()
        res = c.evaluate("Read", session_id="s-1")
        took = time.monotonic() - start
        self.assertEqual((res.decision, res.code), ("deny", SIDECAR_UNAVAILABLE))
        self.assertIn("no answer within 0.3s", res.reason)
        self.assertLess(took, 0.6)

    def test_timeout_with_fail_open_counts(self) -> None:
        peer = BrokenPeer(None)
        self.addCleanup(peer.close)
        c = toolgate.Client(peer.url, timeout=0.1, fail_open=True)
        self.addCleanup(c.close)
        res = c.evaluate("Read", session_id="s-1")
        self.assertEqual((res.decision, res.code, c.fail_open_count), ("allow", SIDECAR_UNAVAILABLE, 1))


class MalformedAnswerTest(unittest.TestCase):
    """Answers that are not decisions fail closed. The peer stands in for
    whatever wrongly answers on the sidecar's address (a proxy, another
    service); the sidecar itself never answers so."""

    def setUp(self) -> None:
        quiet(self)

    def ask(self, answer: bytes, **kw) -> toolgate.EvaluationResult:
        peer = BrokenPeer(answer, **kw)
        self.addCleanup(peer.close)
        c = toolgate.Client(peer.url)
        self.addCleanup(c.close)
        return c.evaluate("Read", session_id="s-1")

    def test_not_decisions(self) -> None:
        cases = {
            "500": (http_answer(500, b"internal error", {"Content-Type": "text/plain"}), "status 500"),
            "503 json": (http_answer(503, b'{"error":"overloaded"}'), "status 503: overloaded"),
            "404": (http_answer(404, b""), "status 404"),
            "empty object": (http_answer(200, b"{}"), "not a decision"),
            "not json": (http_answer(200, b"not json"), "not JSON"),
            "maybe": (http_answer(200, b'{"decision":"maybe"}'), "not a decision"),
            "array": (http_answer(200, b"[1]"), "not a decision"),
            "wrong types": (http_answer(200, b'{"decision":"allow","matchedPolicyVersion":"1"}'), "not a decision"),
            "not utf-8": (http_answer(200, b'{"decision":"\xff"}'), "not JSON"),
            "no http": (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "BadStatusLine"),
            "truncated": (http_answer(200, ALLOW, {"Content-Length": "999"}), "IncompleteRead"),
            "closed at once": (b"", "RemoteDisconnected"),
            "huge": (http_answer(200, b"", {"Content-Length": str(10 << 20)}), "bytes"),
        }
        for name, (answer, why) in cases.items():
            with self.subTest(name):
                res = self.ask(answer, close_after=True)
                self.assertEqual((res.decision, res.code, res.effect), ("deny", SIDECAR_UNAVAILABLE, "deny"))
                self.assertIn(why, res.reason)

    def test_the_real_sidecars_400(self) -> None:
        sc = start_sidecar(self, sample_bundle(), args=["--max-request-elements", "4"])
        c = toolgate.Client(sc.tcp)
        self.addCleanup(c.close)
        res = c.evaluate("Read", session_id="s-1", metadata=EvaluationMetadata(input={"a": 1, "b": 2, "c": 3, "d": 4}))
        self.assertEqual((res.decision, res.code), ("deny", SIDECAR_UNAVAILABLE))
        self.assertIn("status 400", res.reason)

    def test_framings_a_decision_may_come_in(self) -> None:
        chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"".join(
            b"%x\r\n%s\r\n" % (len(p), p) for p in (ALLOW[:10], ALLOW[10:])) + b"0\r\n\r\n"
        until_close = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + ALLOW
        http10 = b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(ALLOW), ALLOW)
        # Two answers to one request: the second must not be read as the
        # next call's answer, so the connection is not reused.
        doubled = http_answer(200, ALLOW) + http_answer(200, b'{"decision":"deny"}')
        chunked_doubled = chunked + http_answer(200, b'{"decision":"deny"}')
        for name, answer, close in (("chunked", chunked, False), ("until close", until_close, True),
                                    ("HTTP/1.0", http10, True), ("doubled", doubled, False),
                                    ("chunked doubled", chunked_doubled, False)):
            with self.subTest(name):
                peer = BrokenPeer(answer, close_after=close)
                self.addCleanup(peer.close)
                c = toolgate.Client(peer.url)
                self.addCleanup(c.close)
                for _ in range(3):
                    res = c.evaluate("Read", session_id="s-1")
                    self.assertEqual((res.decision, res.reason, res.code), ("allow", "ok", None))
                self.assertEqual(peer.accepts, 3 if close or "doubled" in name else 1)


if __name__ == "__main__":
    unittest.main()
