"""toolgate.AsyncClient: the sync client's decisions, discovery, failures and
connection reuse, over asyncio streams, against the real sidecar (and the
broken peers of test_failures where the sidecar never answers wrongly)."""

from __future__ import annotations

import asyncio
import os
import time
import unittest
from unittest import mock

import toolgate
from toolgate import SIDECAR_UNAVAILABLE, EvaluationMetadata

from .support import (
    ALLOW,
    TEST_PEER_PEM,
    BrokenPeer,
    CountingProxy,
    http_answer,
    sample_bundle,
    start_class_sidecar,
    start_sidecar,
    tls_server_context,
)
from .test_failures import quiet

RM_RF = EvaluationMetadata(input={"command": "rm -rf /"})


def run(coro):
    return asyncio.run(coro)


class AsyncDecisionsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.sc = start_class_sidecar(cls, sample_bundle())

    def test_async_client_decides_as_the_sync_client(self) -> None:
        for transport, url in (("tcp", self.sc.tcp), ("unix", self.sc.unix)):
            with self.subTest(transport):
                sync = toolgate.Client(url)
                self.addCleanup(sync.close)

                async def main():
                    async with toolgate.AsyncClient(url) as c:
                        allow = await c.evaluate("Read", session_id="s-1", agent_id="coder-1",
                                                 metadata=EvaluationMetadata(input={"file_path": "/w/README.md"}))
                        deny = await c.evaluate("Bash", session_id="s-1", agent_id="coder-1", metadata=RM_RF,
                                                framework="claude-code")
                        return allow, deny

                allow, deny = run(main())
                self.assertIsInstance(allow, toolgate.EvaluationResult)
                self.assertEqual((allow.decision, allow.matched_rule_id, allow.code), ("allow", "read-only-tools", None))
                self.assertEqual((deny.decision, deny.code, deny.matched_policy_id, deny.matched_policy_version),
                                 ("deny", "no-rm-rf", "bash-no-rm-rf", 1))
                want = sync.evaluate("Bash", session_id="s-1", agent_id="coder-1", metadata=RM_RF,
                                     framework="claude-code")
                for field in ("decision", "reason", "code", "matched_policy_id", "matched_policy_version",
                              "matched_rule_id", "effect", "warnings", "bundle_revision"):
                    self.assertEqual(getattr(deny, field), getattr(want, field), field)
                self.assertNotEqual(deny.decision_id, want.decision_id)

    def test_async_client_finds_the_sidecar_as_the_sync_client(self) -> None:
        with mock.patch.dict(os.environ, {"TOOLGATE_URL": self.sc.unix}):
            c = toolgate.AsyncClient()
        self.assertEqual(c.url, self.sc.unix)
        self.assertEqual(run(c.evaluate("Read")).decision, "allow")
        with self.assertRaisesRegex(ValueError, "TOOLGATE_URL"):
            with mock.patch.dict(os.environ, {"TOOLGATE_URL": "ftp://x"}):
                toolgate.AsyncClient()
        with self.assertRaisesRegex(ValueError, "above 0"):
            toolgate.AsyncClient(self.sc.unix, timeout=0)

    def test_async_client_refuses_bad_arguments_before_sending(self) -> None:
        c = toolgate.AsyncClient(self.sc.unix)
        with self.assertRaisesRegex(ValueError, "tool_name is empty"):
            run(c.evaluate(""))
        with self.assertRaisesRegex(TypeError, "does not encode as JSON"):
            run(c.evaluate("pay", metadata=EvaluationMetadata(kwargs={"x": object()})))

    def test_async_client_keeps_connections_alive(self) -> None:
        for name, upstream, unix in (("tcp", self.sc.tcp, False), ("unix", self.sc.unix, True)):
            with self.subTest(name):
                p = CountingProxy(upstream, unix=unix)
                self.addCleanup(p.close)
                amounts = [300 * i for i in range(10)]

                async def main():
                    async with toolgate.AsyncClient(p.url, timeout=2) as c:
                        for i in range(50):
                            res = await c.evaluate("Bash", agent_id="coder-1", metadata=EvaluationMetadata(
                                input={"command": "rm -rf /" if i % 2 else "ls"}))
                            self.assertEqual(res.decision, "deny" if i % 2 else "allow")
                        sequential = p.accepts
                        # 10 at once: a connection each, every answer its own.
                        many = await asyncio.gather(*(c.evaluate(
                            "pay", agent_id="shop-agent", metadata=EvaluationMetadata(kwargs={"amount": a}))
                            for a in amounts))
                        return sequential, many

                sequential, many = run(main())
                self.assertEqual(sequential, 1, "50 calls one after another opened %d connections" % sequential)
                # Over 1000 the samples' pay-over-cap asks, and a sidecar
                # serving a bundle file cannot ask: denied.
                self.assertEqual([(r.decision, r.code) for r in many],
                                 [("deny", "APPROVAL_UNAVAILABLE") if a > 1000 else ("allow", None) for a in amounts])
                self.assertLessEqual(p.accepts, 11)

    def test_async_client_reconnects_after_the_sidecar_closed_an_idle_connection(self) -> None:
        sc = start_sidecar(self, sample_bundle(), args=["--idle-timeout", "150ms"])
        p = CountingProxy(sc.unix, unix=True)
        self.addCleanup(p.close)

        async def main():
            async with toolgate.AsyncClient(p.url, timeout=2) as c:
                first = await c.evaluate("Read")
                # The sidecar closes the idle connection after 150ms.
                deadline = time.monotonic() + 5
                while not c._idle[0][0].at_eof() and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)
                return first, await c.evaluate("Read")

        first, second = run(main())
        self.assertEqual(first.decision, "allow")
        self.assertEqual((second.decision, second.code), ("allow", None), second.reason)
        self.assertEqual(p.accepts, 2)

    def test_async_client_works_across_event_loops(self) -> None:
        # asyncio.run makes a new loop each time: a connection kept from an
        # earlier one is never used on it.
        c = toolgate.AsyncClient(self.sc.unix)
        for _ in range(3):
            self.assertEqual(run(c.evaluate("Read")).decision, "allow")


class AsyncFailuresTest(unittest.TestCase):
    def setUp(self) -> None:
        quiet(self)

    def test_async_client_fails_closed_when_unreachable(self) -> None:
        for url in ("http://127.0.0.1:1", "unix:///nonexistent/toolgate.sock"):
            with self.subTest(url):
                c = toolgate.AsyncClient(url)
                res = run(c.evaluate("Bash", metadata=RM_RF))
                self.assertEqual((res.decision, res.code, res.effect), ("deny", SIDECAR_UNAVAILABLE, "deny"))
                self.assertIn("denied (fail closed)", res.reason)

    def test_async_client_fails_closed_when_the_sidecar_is_killed(self) -> None:
        sc = start_sidecar(self, sample_bundle())
        c = toolgate.AsyncClient(sc.unix)

        async def main():
            before = await c.evaluate("Read")
            sc.kill()
            return before, await c.evaluate("Read")

        before, after = run(main())
        self.assertEqual(before.decision, "allow")
        self.assertEqual((after.decision, after.code), ("deny", SIDECAR_UNAVAILABLE))

    def test_async_client_fail_open_counts(self) -> None:
        c = toolgate.AsyncClient("http://127.0.0.1:1", fail_open=True)

        async def main():
            return await asyncio.gather(*(c.evaluate("Read") for _ in range(5)))

        for res in run(main()):
            self.assertEqual((res.decision, res.code), ("allow", SIDECAR_UNAVAILABLE))
        self.assertEqual(c.fail_open_count, 5)

    def test_async_client_timeout_is_never_retried(self) -> None:
        for unix in (False, True):
            with self.subTest(unix=unix):
                peer = BrokenPeer(None, unix=unix)  # accepts, reads, never answers
                self.addCleanup(peer.close)
                c = toolgate.AsyncClient(peer.url, timeout=0.2)
                for _ in range(2):
                    start = time.monotonic()
                    res = run(c.evaluate("Read"))
                    took = time.monotonic() - start
                    self.assertGreaterEqual(took, 0.19)
                    self.assertLess(took, 0.6)
                    self.assertEqual((res.decision, res.code), ("deny", SIDECAR_UNAVAILABLE))
                    self.assertIn("no answer within 0.2s", res.reason)
                self.assertEqual(len(peer.requests), 2)

    def test_async_client_bounds_a_trickled_answer(self) -> None:
        peer = BrokenPeer(http_answer(200, ALLOW), trickle=0.02)
        self.addCleanup(peer.close)
        start = time.monotonic()
        res = run(toolgate.AsyncClient(peer.url, timeout=0.3).evaluate("Read"))
        self.assertEqual((res.decision, res.code), ("deny", SIDECAR_UNAVAILABLE))
        self.assertLess(time.monotonic() - start, 0.6)

    def test_async_client_reads_answers_as_the_sync_client(self) -> None:
        # The same parser: not decisions fail closed; every framing of a
        # decision is read, and a connection whose answer leaves bytes
        # behind is not reused.
        chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"".join(
            b"%x\r\n%s\r\n" % (len(p), p) for p in (ALLOW[:10], ALLOW[10:])) + b"0\r\n\r\n"
        doubled = http_answer(200, ALLOW) + http_answer(200, b'{"decision":"deny"}')
        for name, answer, close, accepts in (
                ("content-length", http_answer(200, ALLOW), False, 1),
                ("chunked", chunked, False, 1),
                ("until close", b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + ALLOW, True, 3),
                ("doubled", doubled, False, 3)):
            with self.subTest(name):
                peer = BrokenPeer(answer, close_after=close)
                self.addCleanup(peer.close)

                async def main():
                    c = toolgate.AsyncClient(peer.url)
                    return [await c.evaluate("Read") for _ in range(3)]

                for res in run(main()):
                    self.assertEqual((res.decision, res.reason, res.code), ("allow", "ok", None))
                self.assertEqual(peer.accepts, accepts)
        for answer, why in ((http_answer(503, b'{"error":"overloaded"}'), "status 503: overloaded"),
                            (http_answer(200, b'{"decision":"maybe"}'), "not a decision"),
                            (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "BadStatusLine"),
                            (b"", "RemoteDisconnected")):
            with self.subTest(why):
                peer = BrokenPeer(answer, close_after=True)
                self.addCleanup(peer.close)
                res = run(toolgate.AsyncClient(peer.url).evaluate("Read"))
                self.assertEqual((res.decision, res.code), ("deny", SIDECAR_UNAVAILABLE))
                self.assertIn(why, res.reason)

    def test_async_client_cancelled_call_does_not_leave_its_connection(self) -> None:
        peer = BrokenPeer(None, later=http_answer(200, ALLOW))
        self.addCleanup(peer.close)
        c = toolgate.AsyncClient(peer.url, timeout=5)

        async def main():
            task = asyncio.ensure_future(c.evaluate("Read"))
            while not peer.requests:
                await asyncio.sleep(0.01)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
            # The next call does not read the first one's late answer: a
            # new connection.
            return await c.evaluate("Read")

        res = run(main())
        self.assertEqual((res.decision, res.reason), ("allow", "ok"))
        self.assertEqual(peer.accepts, 2)

    def test_async_client_https(self) -> None:
        peer = BrokenPeer(http_answer(200, ALLOW), tls=tls_server_context())
        self.addCleanup(peer.close)
        url = peer.url.replace("http://", "https://")
        with mock.patch.dict(os.environ, {"SSL_CERT_FILE": TEST_PEER_PEM}):
            c = toolgate.AsyncClient(url)

            async def main():
                return [await c.evaluate("Read") for _ in range(3)]

            for res in run(main()):
                self.assertEqual((res.decision, res.reason), ("allow", "ok"))
        self.assertEqual(peer.accepts, 1)
        with mock.patch.dict(os.environ, {"SSL_CERT_FILE": "/nonexistent.pem", "SSL_CERT_DIR": "/nonexistent"}):
            res = run(toolgate.AsyncClient(url).evaluate("Read"))
        self.assertEqual((res.decision, res.code), ("deny", SIDECAR_UNAVAILABLE))
        self.assertIn("CERTIFICATE_VERIFY_FAILED", res.reason)


class AsyncGuardTest(unittest.TestCase):
    def test_guard_with_an_async_client_awaits_the_decision(self) -> None:
        sc = start_sidecar(self, sample_bundle())
        c = toolgate.AsyncClient(sc.unix)
        ran = []

        @toolgate.guard(c, framework="python", agent_id="shop-agent")
        async def pay(amount, currency="EUR"):
            ran.append(amount)
            return amount

        async def main():
            ok = await pay(250)
            with self.assertRaises(toolgate.ToolDenied) as cm:
                await pay(5000)
            return ok, cm.exception

        ok, denied = run(main())
        self.assertEqual((ok, ran), (250, [250]))
        self.assertEqual((denied.result.code, denied.result.matched_rule_id), ("APPROVAL_UNAVAILABLE", "pay-over-cap"))
        with self.assertRaisesRegex(TypeError, "AsyncClient guards async def tools"):
            @toolgate.guard(c)
            def sync_pay(amount):
                return amount


if __name__ == "__main__":
    unittest.main()
