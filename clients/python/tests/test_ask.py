"""Asked calls: wait and approval on the wire, an ask read as not allowed,
the timeout covering the wait, and the guards waiting for a person."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import unittest

import toolgate
from toolgate import SIDECAR_UNAVAILABLE, Approval, EvaluationMetadata

from .support import ALLOW, BrokenPeer, CountingProxy, ask_bundle, http_answer, start_class_sidecar

PAY = EvaluationMetadata(kwargs={"amount": 5000})

ASK = (b'{"decision":"ask","effect":"ask","matchedPolicyId":"pay-cap","matchedPolicyVersion":1,'
       b'"matchedRuleId":"pay-over-cap","code":"APPROVAL_REQUIRED","reason":"payments over 1000 need a human approval",'
       b'"latencyMs":0.01,"approval":{"name":"pay-x7k2","namespace":"agents","expiresAt":"2026-12-01T10:05:00Z"}}')
APPROVED = (b'{"decision":"allow","effect":"ask","matchedPolicyId":"pay-cap","matchedPolicyVersion":1,'
            b'"matchedRuleId":"pay-over-cap","reason":"approved by alice","latencyMs":0.01,'
            b'"approval":{"name":"pay-x7k2","namespace":"agents","expiresAt":"2026-12-01T10:05:00Z"}}')


def bodies(raw: bytes) -> list:
    """The JSON bodies of the requests in raw (one client's bytes)."""
    out = []
    for part in raw.split(b"POST ")[1:]:
        head, _, rest = part.partition(b"\r\n\r\n")
        length = int(next(h.split(b":", 1)[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")))
        out.append(json.loads(rest[:length]))
    return out


def quiet(test: unittest.TestCase) -> None:
    log = logging.getLogger("toolgate")
    test.addCleanup(log.setLevel, log.level)
    log.setLevel(logging.CRITICAL)


class AskWithoutApprovalsTest(unittest.TestCase):
    """The real sidecar on a bundle file has no API server to ask with: an
    ask rule's call is denied APPROVAL_UNAVAILABLE, waiting or not; what
    the client sent is read back from a proxy in front of it."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.sc = start_class_sidecar(cls, ask_bundle())

    def proxied(self):
        proxy = CountingProxy(self.sc.tcp)
        self.addCleanup(proxy.close)
        return proxy

    def check_unavailable(self, res) -> None:
        self.assertEqual((res.decision, res.code, res.matched_rule_id), ("deny", "APPROVAL_UNAVAILABLE", "pay-over-cap"))
        self.assertFalse(res.allowed)
        self.assertFalse(res.asked)
        self.assertIn("cannot ask", res.reason)

    def test_wait_and_approval_reach_the_sidecar(self) -> None:
        for kw, sent in (
            ({}, {}),
            ({"wait": 90}, {"wait": "90s"}),
            ({"wait": 1.5}, {"wait": "1.5s"}),
            ({"wait": 0}, {}),
            ({"approval": "pay-x7k2"}, {"approval": "pay-x7k2"}),
        ):
            with self.subTest(kw):
                proxy = self.proxied()
                c = toolgate.Client(proxy.url)
                self.addCleanup(c.close)
                self.check_unavailable(c.evaluate("pay", metadata=PAY, **kw))
                [body] = bodies(bytes(proxy.sent))
                self.assertEqual({k: body[k] for k in ("wait", "approval") if k in body}, sent)
                self.assertEqual(body["kwargs"], {"amount": 5000})

    def test_async(self) -> None:
        proxy = self.proxied()

        async def go():
            async with toolgate.AsyncClient(proxy.url) as c:
                return await c.evaluate("pay", metadata=PAY, wait=30, approval="pay-x7k2")

        self.check_unavailable(asyncio.run(go()))
        [body] = bodies(bytes(proxy.sent))
        self.assertEqual((body["wait"], body["approval"]), ("30s", "pay-x7k2"))

    def test_a_small_payment_is_allowed(self) -> None:
        c = toolgate.Client(self.sc.unix)
        self.addCleanup(c.close)
        res = c.evaluate("pay", metadata=EvaluationMetadata(kwargs={"amount": 10}), wait=30)
        self.assertTrue(res.allowed)
        self.assertIsNone(res.approval)

    def test_guard_blocks_with_the_reason(self) -> None:
        proxy = self.proxied()
        c = toolgate.Client(proxy.url)
        self.addCleanup(c.close)
        ran = []

        @toolgate.guard(c)
        def pay(amount):
            ran.append(amount)

        with self.assertRaises(toolgate.ToolDenied) as cm:
            pay(5000)
        self.check_unavailable(cm.exception.result)
        self.assertIn("APPROVAL_UNAVAILABLE: this call needs a person's approval", str(cm.exception))
        self.assertEqual(ran, [])
        # Not an ask: nothing to wait for, no second request.
        self.assertEqual(len(bodies(bytes(proxy.sent))), 1)

    def test_bad_wait_is_refused_before_sending(self) -> None:
        proxy = self.proxied()
        c = toolgate.Client(proxy.url)
        self.addCleanup(c.close)
        for wait, err, msg in (
            (-1, ValueError, "wait=-1: want how many seconds"),
            (float("inf"), ValueError, "wait=inf"),
            (float("nan"), ValueError, "wait=nan"),
            ("30s", TypeError, "wait must be a number of seconds, not '30s'"),
            (True, TypeError, "wait must be a number of seconds"),
        ):
            with self.subTest(wait):
                with self.assertRaisesRegex(err, msg):
                    c.evaluate("pay", metadata=PAY, wait=wait)
                with self.assertRaisesRegex(err, msg):
                    asyncio.run(toolgate.AsyncClient(proxy.url).evaluate("pay", wait=wait))
                with self.assertRaisesRegex(err, msg):
                    toolgate.guard(c, wait=wait)
        for approval in ("", 7):
            with self.assertRaisesRegex(TypeError, "approval must name an ApprovalRequest"):
                c.evaluate("pay", approval=approval)
        self.assertEqual(proxy.accepts, 0)


class AskAnswerTest(unittest.TestCase):
    """Answers the sidecar gives with an API server (the envtest end-to-end
    test asks a real one), played by a peer that records what it is sent."""

    def setUp(self) -> None:
        quiet(self)

    def peer(self, answer: bytes, **kw) -> BrokenPeer:
        p = BrokenPeer(http_answer(200, answer), **kw)
        self.addCleanup(p.close)
        return p

    def sent(self, p: BrokenPeer) -> list:
        return [bodies(r)[0] for r in p.requests]

    def test_an_ask_is_kept_and_not_allowed(self) -> None:
        p = self.peer(ASK)
        for c in (toolgate.Client(p.url, fail_open=True),):
            self.addCleanup(c.close)
            res = c.evaluate("pay", metadata=PAY)
            self.assertEqual((res.decision, res.effect, res.code), ("ask", "ask", "APPROVAL_REQUIRED"))
            self.assertTrue(res.asked)
            self.assertFalse(res.allowed)
            self.assertEqual(res.approval, Approval("pay-x7k2", "agents", "2026-12-01T10:05:00Z"))
            self.assertEqual(c.fail_open_count, 0)

        async def go():
            async with toolgate.AsyncClient(p.url) as c:
                return await c.evaluate("pay", metadata=PAY)

        res = asyncio.run(go())
        self.assertTrue(res.asked and not res.allowed and res.approval.name == "pay-x7k2")

    def test_unknown_decisions_and_bad_approvals_are_not_allowed(self) -> None:
        for body in (
            b'{"decision":"escalate","effect":"escalate","latencyMs":0.01}',
            ASK.replace(b'"name":"pay-x7k2"', b'"name":7'),
            ASK.replace(b'"approval":{', b'"approval":["x"],"x":{'),
        ):
            with self.subTest(body):
                p = self.peer(body)
                c = toolgate.Client(p.url)
                self.addCleanup(c.close)
                res = c.evaluate("pay", metadata=PAY)
                self.assertEqual((res.decision, res.code), ("deny", SIDECAR_UNAVAILABLE))
                self.assertFalse(res.allowed or res.asked)
                self.assertIn("not a decision", res.reason)

    def test_the_timeout_covers_the_wait(self) -> None:
        # The peer holds its answer 0.4s, as a sidecar holds a call until a
        # person approves: past the client's 0.1s timeout, within its wait.
        p = self.peer(APPROVED, delay=0.4)
        c = toolgate.Client(p.url, timeout=0.1)
        self.addCleanup(c.close)
        res = c.evaluate("pay", metadata=PAY, wait=5)
        self.assertTrue(res.allowed, res)
        self.assertEqual(res.reason, "approved by alice")
        start = time.monotonic()
        res = c.evaluate("pay", metadata=PAY)
        self.assertEqual((res.decision, res.code), ("deny", SIDECAR_UNAVAILABLE))
        self.assertIn("no answer within 0.1s", res.reason)
        self.assertLess(time.monotonic() - start, 0.35)

        async def go(wait):
            async with toolgate.AsyncClient(p.url, timeout=0.1) as ac:
                return await ac.evaluate("pay", metadata=PAY, wait=wait)

        self.assertTrue(asyncio.run(go(5)).allowed)
        res = asyncio.run(go(None))
        self.assertEqual((res.decision, res.code), ("deny", SIDECAR_UNAVAILABLE))
        self.assertEqual([b.get("wait") for b in self.sent(p)], ["5s", None, "5s", None])

    def test_guard_waits_for_the_approval(self) -> None:
        # The first answer asks; the call sent again with its approval and
        # the wait is approved.
        p = self.peer(ASK, later=http_answer(200, APPROVED))
        c = toolgate.Client(p.url, timeout=0.2)
        self.addCleanup(c.close)
        ran = []

        # judge_result=False: what the call sends, not its result's.
        @toolgate.guard(c, agent_id="shop-agent", judge_result=False)
        def pay(amount):
            ran.append(amount)
            return "paid"

        self.assertEqual(pay(5000), "paid")
        self.assertEqual(ran, [5000])
        first, second = self.sent(p)
        self.assertNotIn("wait", first)
        self.assertNotIn("approval", first)
        self.assertEqual((second["wait"], second["approval"]), ("3600s", "pay-x7k2"))
        del first["session_id"], second["session_id"], second["wait"], second["approval"]
        self.assertEqual(first, second)  # the same call, so the approval is its own

    def test_guard_not_waiting_blocks_an_ask(self) -> None:
        p = self.peer(ASK, later=http_answer(200, APPROVED))
        c = toolgate.Client(p.url)
        self.addCleanup(c.close)

        @toolgate.guard(c, wait=0)
        def pay(amount):
            raise AssertionError("ran")

        with self.assertRaises(toolgate.ToolDenied) as cm:
            pay(5000)
        self.assertEqual(cm.exception.result.decision, "ask")
        self.assertIn("APPROVAL_REQUIRED: payments over 1000 need a human approval", str(cm.exception))
        self.assertEqual(len(p.requests), 1)

    def test_guard_still_asked_after_the_wait_blocks(self) -> None:
        p = self.peer(ASK)
        c = toolgate.Client(p.url)
        self.addCleanup(c.close)

        @toolgate.guard(c, wait=2)
        def pay(amount):
            raise AssertionError("ran")

        with self.assertRaises(toolgate.ToolDenied) as cm:
            pay(5000)
        self.assertTrue(cm.exception.result.asked)
        self.assertEqual([b.get("wait") for b in self.sent(p)], [None, "2s"])

    def test_async_guard_waits(self) -> None:
        p = self.peer(ASK, later=http_answer(200, APPROVED))
        c = toolgate.AsyncClient(p.url, timeout=0.2)

        @toolgate.guard(c, wait=60, judge_result=False)
        async def pay(amount):
            return "paid %d" % amount

        async def go():
            try:
                return await pay(5000)
            finally:
                await c.close()

        self.assertEqual(asyncio.run(go()), "paid 5000")
        self.assertEqual([(b.get("wait"), b.get("approval")) for b in self.sent(p)], [(None, None), ("60s", "pay-x7k2")])


if __name__ == "__main__":
    unittest.main()
