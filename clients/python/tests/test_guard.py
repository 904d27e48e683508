"""toolgate.guard on plain and async tool functions."""

from __future__ import annotations

import asyncio
import logging
import threading
import unittest

import toolgate

from .support import sample_bundle, start_class_sidecar, start_sidecar


class GuardTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.sc = start_class_sidecar(cls, sample_bundle(), decision_log="stdout")
        cls.client = toolgate.Client(cls.sc.unix)
        cls.addClassCleanup(cls.client.close)

    def test_sync(self) -> None:
        ran = []

        @toolgate.guard(self.client, session_id="g-sync", framework="python", agent_id="shop-agent")
        def pay(amount=None, currency="EUR"):
            """Pays."""
            ran.append((amount, currency))
            return "paid %s %s" % (amount, currency)

        self.assertEqual(pay.__name__, "pay")
        self.assertEqual(pay.__doc__, "Pays.")
        self.assertEqual(pay(amount=250, currency="EUR"), "paid 250 EUR")
        with self.assertRaises(toolgate.ToolDenied) as cm:
            pay(amount=5000)
        self.assertIsInstance(cm.exception, PermissionError)
        # pay-over-cap asks, and this sidecar (a bundle file) cannot ask:
        # denied, the rule kept, the code and reason in the message.
        self.assertEqual((cm.exception.result.decision, cm.exception.result.code, cm.exception.result.matched_rule_id),
                         ("deny", "APPROVAL_UNAVAILABLE", "pay-over-cap"))
        self.assertEqual(cm.exception.tool_name, "pay")
        self.assertIn("toolgate denied pay: APPROVAL_UNAVAILABLE: this call needs a person's approval", str(cm.exception))
        # A positional argument is bound to its parameter's name: kwargs.amount.
        self.assertEqual(pay(250), "paid 250 EUR")
        with self.assertRaises(toolgate.ToolDenied) as cm:
            pay(5000)
        self.assertEqual(cm.exception.result.matched_rule_id, "pay-over-cap")
        # Left out, amount is sent with its default (None): the rule that
        # needs kwargs.amount denies, as the function would run without one.
        with self.assertRaises(toolgate.ToolDenied) as cm:
            pay()
        self.assertEqual(cm.exception.result.code, "pay-without-amount")
        self.assertEqual(ran, [(250, "EUR"), (250, "EUR")], "a denied tool must not run")

    def test_method(self) -> None:
        client = self.client

        class Shop:
            def __init__(self) -> None:
                self.paid = []

            @toolgate.guard(client, session_id="g-method", framework="python", agent_id="shop-agent")
            def pay(self, amount=None, currency="EUR"):
                self.paid.append(amount)

            @classmethod
            @toolgate.guard(client, session_id="g-method", framework="python", agent_id="shop-agent", tool_name="pay")
            def pay_for_all(cls, *, amount):
                return amount

        shop = Shop()
        shop.pay(amount=250)
        with self.assertRaises(toolgate.ToolDenied) as cm:
            shop.pay(amount=5000)
        self.assertEqual(cm.exception.result.matched_rule_id, "pay-over-cap")
        # The instance is not an argument: the first positional argument
        # after it is amount, read by the rule on kwargs.amount.
        with self.assertRaises(toolgate.ToolDenied) as cm:
            shop.pay(5000)
        self.assertEqual(cm.exception.result.matched_rule_id, "pay-over-cap")
        shop.pay(250)
        self.assertEqual(Shop.pay_for_all(amount=10), 10)
        with self.assertRaises(toolgate.ToolDenied):
            Shop.pay_for_all(amount=5000)
        self.assertEqual(shop.paid, [250, 250])
        # Six calls decided; the three that ran had their results judged.
        logged = self.sc.wait_decision_log(lambda d: d.get("session_id") == "g-method", 9)
        self.assertEqual(len(logged), 9, logged)
        self.assertEqual(sum(d.get("phase") == "result" for d in logged), 3, logged)

    def test_async(self) -> None:
        ran = []
        loop_thread = []

        @toolgate.guard(self.client, session_id="g-async", framework="python", agent_id="shop-agent", tool_name="pay")
        async def transfer(amount: int, currency: str = "EUR") -> str:
            loop_thread.append(threading.current_thread())
            ran.append(amount)
            return "paid %d" % amount

        async def main():
            ok = await transfer(amount=250)
            with self.assertRaises(toolgate.ToolDenied) as cm:
                await transfer(amount=5000, currency="EUR")
            # Several at once: the loop is not blocked by the sidecar.
            many = await asyncio.gather(*(transfer(amount=100 * i) for i in range(5)))
            return ok, cm.exception, many, threading.current_thread()

        ok, denied, many, loop = asyncio.run(main())
        self.assertEqual(ok, "paid 250")
        self.assertEqual((denied.result.code, denied.result.matched_rule_id, denied.result.matched_policy_id),
                         ("APPROVAL_UNAVAILABLE", "pay-over-cap", "pay-cap"))
        self.assertEqual(many, ["paid %d" % (100 * i) for i in range(5)])
        self.assertEqual(ran[0], 250)
        self.assertEqual(sorted(ran[1:]), [0, 100, 200, 300, 400])  # the gathered calls, in any order
        self.assertEqual(set(loop_thread), {loop}, "the tool itself runs on the event loop")
        self.assertTrue(asyncio.iscoroutinefunction(transfer))

    def test_what_reaches_the_sidecar(self) -> None:
        sc = start_sidecar(self, sample_bundle(), decision_log="stdout",
                                 args=["--log-fields", "args,kwargs,framework"])
        c = toolgate.Client(sc.tcp)
        self.addCleanup(c.close)

        @toolgate.guard(c, session_id="g-wire", framework="my-agents", agent_id="coder-1")
        def lookup(*args, **kwargs):
            return args, kwargs

        with self.assertRaises(toolgate.ToolDenied) as cm:  # default deny: no rule allows "lookup"
            lookup("a", 2, flag=True)
        self.assertEqual(str(cm.exception),
                         'toolgate denied lookup: no rule matched and policy "default-deny-readonly" denies by default')
        sc.stop()
        line = [x for x in sc.decision_log() if x.get("session_id") == "g-wire"]
        self.assertEqual(len(line), 1, sc.decision_log())
        line = line[0]
        self.assertEqual(line["tool_name"], "lookup")
        self.assertEqual(line["agent_id"], "coder-1")
        self.assertEqual(line["framework"], "my-agents")
        self.assertEqual(line["request"], {"args": ["a", 2], "kwargs": {"flag": True}, "framework": "my-agents"})

    def test_fails_closed(self) -> None:
        c = toolgate.Client("http://127.0.0.1:1")
        ran = []

        @toolgate.guard(c, session_id="g-down")
        def read():
            ran.append(1)

        with self.assertLogs("toolgate", logging.WARNING), self.assertRaises(toolgate.ToolDenied) as cm:
            read()
        self.assertEqual(cm.exception.result.code, toolgate.SIDECAR_UNAVAILABLE)
        self.assertEqual(ran, [])

    def test_misuse(self) -> None:
        with self.assertRaises(TypeError):
            toolgate.guard("http://127.0.0.1:8181", session_id="s")  # type: ignore[arg-type]

        @toolgate.guard(self.client, session_id="g-misuse")
        def tool(x):
            return x

        with self.assertRaisesRegex(TypeError, "does not encode as JSON"):
            tool(object())


if __name__ == "__main__":
    unittest.main()
