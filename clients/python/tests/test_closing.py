"""The clients leave no socket open behind them: not the async client's
idle connections once its event loop ends, not a thread's connection once
Client.close() or the thread ends, not a connection a failed call had. And
the suite's own leak check (tests/__init__.py) fails a test that leaks."""

from __future__ import annotations

import asyncio
import gc
import socket
import threading
import time
import unittest
import warnings
from unittest import mock
from typing import Callable, List

import toolgate

from . import LeakCheckedSuite, open_sockets
from .support import (
    ALLOW,
    TEST_PEER_PEM,
    BrokenPeer,
    http_answer,
    sample_bundle,
    sockets_to,
    start_class_sidecar,
    tls_server_context,
)
from .test_failures import quiet


def resource_warnings(fn: Callable[[], object]) -> List[str]:
    """The ResourceWarnings raised while fn runs and the garbage it left is
    collected."""
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always", ResourceWarning)
        fn()
        gc.collect()
    return [str(w.message) for w in got if issubclass(w.category, ResourceWarning)]


class AsyncClientClosingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.sc = start_class_sidecar(cls, sample_bundle())

    def setUp(self) -> None:
        quiet(self)

    def test_the_end_of_asyncio_run_closes_the_idle_connections(self) -> None:
        # A client used by one asyncio.run after another (a sync program
        # calling async code): each loop's kept-alive connection used to
        # stay open after its loop closed, a socket per asyncio.run until
        # the garbage collector found it.
        for transport, url in (("unix", self.sc.unix), ("tcp", self.sc.tcp)):
            with self.subTest(transport):
                before = open_sockets()
                c = toolgate.AsyncClient(url)

                def runs() -> None:
                    for i in range(3):
                        self.assertEqual(asyncio.run(c.evaluate("Read")).decision, "allow")
                        self.assertEqual(open_sockets(), before, "after asyncio.run #%d" % (i + 1))

                self.assertEqual(resource_warnings(runs), [])
                # The client is still usable, and close() on a new loop
                # finds nothing left to close.
                self.assertEqual(asyncio.run(c.evaluate("Read")).decision, "allow")
                asyncio.run(c.close())
                self.assertEqual(open_sockets(), before)

    def test_a_client_dropped_inside_its_loop_leaves_no_socket(self) -> None:
        before = open_sockets()

        async def main() -> None:
            c = toolgate.AsyncClient(self.sc.unix)
            await asyncio.gather(*(c.evaluate("Read") for _ in range(4)))  # 4 idle connections

        self.assertEqual(resource_warnings(lambda: asyncio.run(main())), [])
        self.assertEqual(open_sockets(), before)

    def test_close_waits_for_no_tls_peer(self) -> None:
        # Closing a TLS connection the usual way waits up to 30 s for the
        # peer's close_notify, which this peer never sends: the client
        # aborts its idle connections, so the loop's end is not held up.
        peer = BrokenPeer(http_answer(200, ALLOW), tls=tls_server_context())
        self.addCleanup(peer.close)
        url = peer.url.replace("http://", "https://")
        with mock.patch.dict("os.environ", {"SSL_CERT_FILE": TEST_PEER_PEM}):
            c = toolgate.AsyncClient(url)

            async def main() -> List[toolgate.EvaluationResult]:
                return [await c.evaluate("Read") for _ in range(2)]

            start = time.monotonic()
            got: List[List[toolgate.EvaluationResult]] = []
            self.assertEqual(resource_warnings(lambda: got.append(asyncio.run(main()))), [])
            took = time.monotonic() - start
        self.assertEqual([r.decision for r in got[0]], ["allow", "allow"])
        self.assertEqual(peer.accepts, 1)
        self.assertLess(took, 5, "asyncio.run took %.1fs to end" % took)
        self.assertEqual(sockets_to(peer.url), 0)

    def test_failed_calls_leave_no_socket(self) -> None:
        # Every way a call fails closes its connection (a timeout, a
        # cancel, an answer that is not HTTP, a peer that hangs up), over
        # TLS too, and at once: nothing waits for the peer's close_notify.
        cases = (("timeout", None, 0.1, False),
                 ("cancelled", None, 5, True),
                 ("not http", b"SSH-2.0-OpenSSH_9.6\r\n\r\n", 1, False),
                 ("hung up", b"", 1, False))
        for (name, answer, timeout, cancel), tls in [(case, tls) for tls in (False, True) for case in cases]:
            with self.subTest(name, tls=tls), mock.patch.dict("os.environ", {"SSL_CERT_FILE": TEST_PEER_PEM}):
                peer = BrokenPeer(answer, tls=tls_server_context() if tls else None)
                self.addCleanup(peer.close)
                c = toolgate.AsyncClient(peer.url.replace("http://", "https://" if tls else "http://"), timeout=timeout)

                async def main() -> int:
                    for i in range(3):
                        task = asyncio.ensure_future(c.evaluate("Read"))
                        if cancel:
                            deadline = time.monotonic() + 5
                            while len(peer.requests) <= i and time.monotonic() < deadline:
                                await asyncio.sleep(0.005)
                            task.cancel()
                            with self.assertRaises(asyncio.CancelledError):
                                await task
                        else:
                            self.assertEqual((await task).code, toolgate.SIDECAR_UNAVAILABLE)
                    await asyncio.sleep(0)  # a closed transport lets its socket go on the next turn
                    return sockets_to(peer.url)

                start = time.monotonic()
                got: List[int] = []
                self.assertEqual(resource_warnings(lambda: got.append(asyncio.run(main()))), [])
                self.assertLess(time.monotonic() - start, 5)
                self.assertEqual(got, [0], "connections open within the loop")
                self.assertEqual(sockets_to(peer.url), 0)


class HandshakeTest(unittest.TestCase):
    def test_an_unanswered_tls_handshake_leaves_no_socket(self) -> None:
        # https:// to a peer that reads the ClientHello and never answers:
        # the call times out inside the handshake, in either client.
        quiet(self)
        peer = BrokenPeer(None)
        self.addCleanup(peer.close)
        url = peer.url.replace("http://", "https://")

        def calls() -> None:
            c = toolgate.Client(url, timeout=0.2)
            self.addCleanup(c.close)
            self.assertIn("no answer within 0.2s", c.evaluate("Read").reason)
            self.assertEqual(sockets_to(peer.url), 0, "after Client's call")
            res = asyncio.run(toolgate.AsyncClient(url, timeout=0.2).evaluate("Read"))
            self.assertIn("no answer within 0.2s", res.reason)
            self.assertEqual(sockets_to(peer.url), 0, "after AsyncClient's call")

        self.assertEqual(resource_warnings(calls), [])


class ClientClosingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.sc = start_class_sidecar(cls, sample_bundle())

    def setUp(self) -> None:
        quiet(self)

    def test_close_closes_every_threads_connection(self) -> None:
        # Four threads each keep a connection; close() from the main
        # thread closes all four while the threads live on; each thread's
        # next call opens a new one, and closes it when the thread ends.
        c = toolgate.Client(self.sc.tcp)
        self.addCleanup(c.close)
        first, second = threading.Barrier(5, timeout=10), threading.Barrier(5, timeout=10)
        go_on, finish, errors = threading.Event(), threading.Event(), []

        def work() -> None:
            try:
                ok = c.evaluate("Read").decision == "allow"
                first.wait()
                go_on.wait(10)
                ok = c.evaluate("Read").decision == "allow" and ok
                second.wait()
                finish.wait(10)
                if not ok:
                    errors.append("a call was not allowed")
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        def run_threads() -> None:
            threads = [threading.Thread(target=work) for _ in range(4)]
            for t in threads:
                t.start()
            try:
                first.wait()
                self.assertEqual(sockets_to(self.sc.tcp), 4)
                c.close()
                self.assertEqual(sockets_to(self.sc.tcp), 0, "after close()")
                go_on.set()
                second.wait()
                self.assertEqual(sockets_to(self.sc.tcp), 4, "after a call each after close()")
            finally:
                go_on.set()
                finish.set()
                for t in threads:
                    t.join(10)
            # A thread's data goes just after it ends, join() may return
            # first (Python versions differ): wait for it, with a deadline.
            deadline = time.monotonic() + 5
            while sockets_to(self.sc.tcp) and time.monotonic() < deadline:
                time.sleep(0.01)
            self.assertEqual(sockets_to(self.sc.tcp), 0, "after the threads ended")

        self.assertEqual(resource_warnings(run_threads), [])
        self.assertEqual(errors, [])

    def test_failed_calls_leave_no_socket(self) -> None:
        cases = (("timeout", None, 0.1),
                 ("not http", b"SSH-2.0-OpenSSH_9.6\r\n\r\n", 1),
                 ("hung up", b"", 1),
                 ("status 503, connection: close", http_answer(503, b"{}", {"Connection": "close"}), 1))
        for (name, answer, timeout), tls in [(case, tls) for tls in (False, True) for case in cases]:
            with self.subTest(name, tls=tls), mock.patch.dict("os.environ", {"SSL_CERT_FILE": TEST_PEER_PEM}):
                peer = BrokenPeer(answer, tls=tls_server_context() if tls else None)
                self.addCleanup(peer.close)
                c = toolgate.Client(peer.url.replace("http://", "https://" if tls else "http://"), timeout=timeout)
                self.addCleanup(c.close)

                def calls() -> None:
                    for _ in range(3):
                        self.assertEqual(c.evaluate("Read").code, toolgate.SIDECAR_UNAVAILABLE)
                        self.assertEqual(sockets_to(peer.url), 0)

                self.assertEqual(resource_warnings(calls), [])


class LeakCheckTest(unittest.TestCase):
    def test_a_test_that_leaks_a_socket_fails(self) -> None:
        class Leaky(unittest.TestCase):
            def test_leaks(self) -> None:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.bind(("127.0.0.1", 0))
                del s

            def test_closes(self) -> None:
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                    s.bind(("127.0.0.1", 0))

        suite = LeakCheckedSuite([Leaky("test_leaks"), Leaky("test_closes")])
        result = unittest.TestResult()
        suite.run(result)
        self.assertEqual([t.id().rsplit(".", 1)[1] for t, _ in result.failures], ["test_leaks"])
        self.assertIn("left 1 unclosed resource(s) to the garbage collector", result.failures[0][1])
        self.assertIn("unclosed <socket.socket", result.failures[0][1])

    def test_a_socket_held_past_the_last_test_fails_the_run(self) -> None:
        held: List[socket.socket] = []

        class Holding(unittest.TestCase):
            def test_holds(self) -> None:
                held.append(socket.socket(socket.AF_INET, socket.SOCK_STREAM))

        result = unittest.TestResult()
        try:
            LeakCheckedSuite([Holding("test_holds")]).run(result)
        finally:
            for s in held:
                s.close()
        self.assertEqual(len(result.failures), 1)
        self.assertIn("the suite still holds 1 resource(s)", result.failures[0][1])
        self.assertIn("still open: fd", result.failures[0][1])


if __name__ == "__main__":
    unittest.main()
