"""toolgate.guard binds a call's arguments to the tool's parameters by name
(inspect.signature), so a rule on kwargs.amount reads the amount however
the call passes it. Against the real sidecar with a Policy that denies
amount > 1000."""

from __future__ import annotations

import asyncio
import unittest

import toolgate

from .support import policy_bundle, start_class_sidecar

PAY_CAP = """\
apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: pay-cap}
spec:
  rules:
  - id: pay-over-cap
    description: payments over 1000 need a human approval
    effect: deny
    conditions:
    - {field: tool_name, operator: eq, value: pay}
    - {field: kwargs.amount, operator: gt, value: 1000}
"""

_SENTINEL = object()


class BindingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.sc = start_class_sidecar(cls, policy_bundle(PAY_CAP), decision_log="stdout",
                                     args=["--log-fields", "args,kwargs"])
        cls.client = toolgate.Client(cls.sc.unix)
        cls.addClassCleanup(cls.client.close)

    def sent(self, session: str, count: int):
        # The calls' decisions; the guard's result decisions (phase result)
        # carry the same call.
        return [d["request"] for d in self.sc.wait_decision_log(
            lambda d: d.get("session_id") == session and "phase" not in d, count)]

    def test_same_call_decides_the_same_whichever_way_it_is_sent(self) -> None:
        ran = []

        @toolgate.guard(self.client, session_id="b-same")
        def pay(amount, currency="EUR"):
            ran.append(amount)

        ways = {
            "pay(5000)": lambda: pay(5000),
            "pay(amount=5000)": lambda: pay(amount=5000),
            "pay(*[5000])": lambda: pay(*[5000]),
            "pay(**{'amount': 5000})": lambda: pay(**{"amount": 5000}),
            "pay(5000, 'EUR')": lambda: pay(5000, "EUR"),
            "pay(currency='EUR', amount=5000)": lambda: pay(currency="EUR", amount=5000),
        }
        for way, call in ways.items():
            with self.subTest(way), self.assertRaises(toolgate.ToolDenied) as cm:
                call()
            self.assertEqual(cm.exception.result.code, "pay-over-cap", way)
        self.assertEqual(ran, [], "a denied payment must not run")
        pay(500)
        pay(amount=500)
        self.assertEqual(ran, [500, 500])
        # Every way reaches the sidecar as the same request.
        self.assertEqual(self.sent("b-same", 8), [{"kwargs": {"amount": 5000, "currency": "EUR"}}] * 6 +
                         [{"kwargs": {"amount": 500, "currency": "EUR"}}] * 2)

    def test_guard_sends_defaults_the_function_runs_with(self) -> None:
        # pay() runs with amount=5000: the rule on kwargs.amount must see it.
        @toolgate.guard(self.client, session_id="b-default")
        def pay(amount=5000, memo=_SENTINEL):
            return amount

        with self.assertRaises(toolgate.ToolDenied):
            pay()
        self.assertEqual(pay(10), 10)
        # A default that is not JSON (a sentinel) reads as absent.
        self.assertEqual(self.sent("b-default", 2), [{"kwargs": {"amount": 5000}}, {"kwargs": {"amount": 10}}])

    def test_guard_varargs_stay_args_named_go_to_kwargs(self) -> None:
        @toolgate.guard(self.client, session_id="b-varargs", tool_name="pay")
        def pay(amount, *notes, dry_run=False, **extra):
            return amount

        with self.assertRaises(toolgate.ToolDenied):
            pay(5000, "rent", "june", dry_run=True, payee="x")
        self.assertEqual(pay(5, "tip"), 5)
        self.assertEqual(self.sent("b-varargs", 2), [
            {"args": ["rent", "june"], "kwargs": {"amount": 5000, "dry_run": True, "payee": "x"}},
            {"args": ["tip"], "kwargs": {"amount": 5, "dry_run": False}},
        ])

    def test_guard_refuses_calls_the_function_would_refuse(self) -> None:
        @toolgate.guard(self.client, session_id="b-refused")
        def pay(amount):
            return amount

        for bad in (lambda: pay(), lambda: pay(1, 2), lambda: pay(1, amount=2), lambda: pay(amount=1, x=2)):
            with self.assertRaises(TypeError):
                bad()

        @toolgate.guard(self.client, session_id="b-refused", tool_name="pay")
        def positional_only(amount, /, **kw):
            return amount

        with self.assertRaisesRegex(TypeError, "could not tell them apart"):
            positional_only(5, amount=5000)
        # Nothing was sent: the one decision logged for this session is the
        # call after them.
        self.assertEqual(pay(7), 7)
        self.assertEqual(self.sent("b-refused", 2), [{"kwargs": {"amount": 7}}])

    def test_guard_binds_methods_and_coroutines_by_name(self) -> None:
        client = self.client

        class Shop:
            @toolgate.guard(client, session_id="b-method")
            def pay(self, amount):
                return amount

        with self.assertRaises(toolgate.ToolDenied):
            Shop().pay(5000)

        @toolgate.guard(toolgate.AsyncClient(self.sc.unix), session_id="b-method", tool_name="pay")
        async def pay_async(amount):
            return amount

        async def main():
            with self.assertRaises(toolgate.ToolDenied):
                await pay_async(5000)
            return await pay_async(7)

        self.assertEqual(asyncio.run(main()), 7)
        self.assertEqual(self.sent("b-method", 3), [{"kwargs": {"amount": a}} for a in (5000, 5000, 7)])


if __name__ == "__main__":
    unittest.main()
