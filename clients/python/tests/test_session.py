"""session_id: one per client unless given, sent with every call that names
none; the sidecar counts per-session limits (per: session) under it."""

from __future__ import annotations

import asyncio
import re
import unittest

import toolgate

from .support import ALLOW, BrokenPeer, http_answer, policy_bundle, start_class_sidecar

# Two searches a session; a third in the same session is denied, whichever
# agent sends it. The sidecar counts allowed calls per session_id.
PER_SESSION = """\
apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: search-per-session}
spec:
  rules:
  - id: two-searches-a-session
    description: two searches a session
    effect: deny
    conditions: [{field: tool_name, operator: eq, value: search}]
    when: {rateLimit: {max: 2, window: 1h, per: session}}
  - id: search
    effect: allow
    conditions: [{field: tool_name, operator: eq, value: search}]
"""


class SessionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.sc = start_class_sidecar(cls, policy_bundle(PER_SESSION), decision_log="stdout")

    def test_session_id_defaults_to_one_per_client(self) -> None:
        a, b = toolgate.Client(self.sc.unix), toolgate.AsyncClient(self.sc.tcp)
        self.addCleanup(a.close)
        self.assertRegex(a.session_id, r"^[0-9a-f]{32}$")
        self.assertRegex(b.session_id, r"^[0-9a-f]{32}$")
        self.assertNotEqual(a.session_id, b.session_id)
        self.assertNotEqual(a.session_id, toolgate.Client(self.sc.unix).session_id)
        self.assertEqual(toolgate.Client(self.sc.unix, session_id="chat-7").session_id, "chat-7")
        a.evaluate("search")
        asyncio.run(b.evaluate("search"))
        logged = self.sc.wait_decision_log(lambda d: d.get("session_id") in (a.session_id, b.session_id), 2)
        self.assertEqual(sorted(d["session_id"] for d in logged), sorted([a.session_id, b.session_id]))

    def test_session_limits_count_per_client_session(self) -> None:
        # Each client is its own session: the limit counts its calls apart
        # from the other client's, and a call naming a session counts there.
        a, b = toolgate.Client(self.sc.unix), toolgate.Client(self.sc.unix)
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        self.assertEqual([a.evaluate("search").decision for _ in range(3)], ["allow", "allow", "deny"])
        self.assertEqual(a.evaluate("search").code, "two-searches-a-session")
        self.assertEqual(b.evaluate("search").decision, "allow")
        # The same explicit session from either client shares one count.
        self.assertEqual(a.evaluate("search", session_id="shared").decision, "allow")
        self.assertEqual(b.evaluate("search", session_id="shared").decision, "allow")
        self.assertEqual(b.evaluate("search", session_id="shared").decision, "deny")

    def test_session_id_arguments(self) -> None:
        peer = BrokenPeer(http_answer(200, ALLOW))
        self.addCleanup(peer.close)
        c = toolgate.Client(peer.url, session_id="chat-7")
        self.addCleanup(c.close)
        c.evaluate("Read")
        c.evaluate("Read", session_id="other")
        c.evaluate("Read", session_id="")  # "" sends none
        bodies = [r.partition(b"\r\n\r\n")[2] for r in peer.requests]
        self.assertEqual(bodies, [b'{"tool_name":"Read","session_id":"chat-7"}',
                                  b'{"tool_name":"Read","session_id":"other"}', b'{"tool_name":"Read"}'])
        for cls in (toolgate.Client, toolgate.AsyncClient):
            with self.assertRaisesRegex(ValueError, re.escape("%s(session_id='')" % cls.__name__)):
                cls(peer.url, session_id="")
            with self.assertRaisesRegex(TypeError, "session_id"):
                cls(peer.url, session_id=7)  # type: ignore[arg-type]

    def test_guard_sends_the_clients_session(self) -> None:
        c = toolgate.Client(self.sc.unix)
        self.addCleanup(c.close)

        @toolgate.guard(c)
        def search(q):
            return q

        self.assertEqual([search("a"), search("b")], ["a", "b"])
        with self.assertRaises(toolgate.ToolDenied) as cm:
            search("c")
        self.assertEqual(cm.exception.result.code, "two-searches-a-session")
        # Three calls, and the results of the two that ran, in the session.
        logged = self.sc.wait_decision_log(lambda d: d.get("session_id") == c.session_id, 5)
        self.assertEqual(len(logged), 5)
        self.assertEqual(sum(d.get("phase") == "result" for d in logged), 2)


if __name__ == "__main__":
    unittest.main()
