"""Decisions through the client from a real sidecar on the samples' bundle."""

from __future__ import annotations

import json
import logging
import re
import unittest

import toolgate
from toolgate import EvaluationMetadata

from .support import SAMPLES, sample_bundle, start_class_sidecar, start_sidecar

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


class DecisionsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.sc = start_class_sidecar(cls, sample_bundle())

    def clients(self):
        for transport, url in (("tcp", self.sc.tcp), ("unix", self.sc.unix)):
            c = toolgate.Client(url)
            self.addCleanup(c.close)
            yield transport, c

    def test_allow(self) -> None:
        for transport, c in self.clients():
            with self.subTest(transport):
                res = c.evaluate("Read", session_id="s-1", agent_id="coder-1",
                                 metadata=EvaluationMetadata(input={"file_path": "/workspace/README.md"}))
                self.assertEqual(res.decision, "allow")
                self.assertTrue(res.allowed)
                self.assertEqual(res.effect, "allow")
                self.assertIsNone(res.code)
                self.assertEqual(res.matched_policy_id, "default-deny-readonly")
                self.assertEqual(res.matched_policy_version, 1)
                self.assertEqual(res.matched_rule_id, "read-only-tools")
                self.assertIsInstance(res.latency_ms, float)
                self.assertTrue(res.bundle_revision.startswith("sha256:"))
                self.assertTrue(res.decision_id)

    def test_rule_deny_codes_the_rule(self) -> None:
        for transport, c in self.clients():
            with self.subTest(transport):
                res = c.evaluate("Bash", session_id="s-1", agent_id="coder-1",
                                 metadata=EvaluationMetadata(input={"command": "rm -rf /"}, tool_use_id="toolu_1"),
                                 framework="claude-code")
                self.assertEqual(res.decision, "deny")
                self.assertFalse(res.allowed)
                # The seed: the rule's id becomes code, its description reason.
                self.assertEqual(res.code, "no-rm-rf")
                self.assertEqual(res.reason, "rm -rf is blocked; delete specific files, or ask a human")
                self.assertEqual((res.matched_policy_id, res.matched_policy_version, res.matched_rule_id),
                                 ("bash-no-rm-rf", 1, "no-rm-rf"))
                self.assertEqual(res.effect, "deny")

    def test_kwargs_reach_policies(self) -> None:
        c = toolgate.Client(self.sc.unix)
        self.addCleanup(c.close)
        res = c.evaluate("pay", session_id="s-1", agent_id="shop-agent",
                         metadata=EvaluationMetadata(args=[], kwargs={"amount": 5000, "currency": "EUR"}))
        # pay-over-cap asks; this sidecar serves a bundle file, so it
        # cannot ask, and denies naming the rule.
        self.assertEqual((res.decision, res.code, res.matched_rule_id),
                         ("deny", "APPROVAL_UNAVAILABLE", "pay-over-cap"))
        self.assertIn("this call needs a person's approval", res.reason)
        res = c.evaluate("pay", session_id="s-1", agent_id="shop-agent",
                         metadata=EvaluationMetadata(kwargs={"amount": 250}))
        self.assertEqual((res.decision, res.matched_rule_id, res.code), ("allow", "pay-within-cap", None))

    def test_frozen(self) -> None:
        for transport, c in self.clients():
            with self.subTest(transport):
                res = c.evaluate("Read", session_id="s-1", agent_id="Billing-Bot-7")
                self.assertEqual((res.decision, res.code), ("deny", "AGENT_FROZEN"))
                self.assertIn("INC-1042", res.reason)
                self.assertIsNone(res.matched_rule_id)

    def test_default_deny_has_no_code(self) -> None:
        c = toolgate.Client(self.sc.tcp)
        self.addCleanup(c.close)
        res = c.evaluate("Write", session_id="s-1", agent_id="coder-1",
                         metadata=EvaluationMetadata(input={"file_path": "/x"}))
        self.assertEqual((res.decision, res.code, res.matched_rule_id), ("deny", None, None))
        self.assertIn("denies by default", res.reason)

    def test_extra_fields_reach_policies(self) -> None:
        c = toolgate.Client(self.sc.unix)
        self.addCleanup(c.close)
        base = dict(session_id="s-1", agent_id="report-bot",
                    metadata=EvaluationMetadata(input={"sql": "DROP TABLE orders"}))
        res = c.evaluate("mcp__db__query", extra={"roles": ["analyst"], "side_effect": "write"}, **base)
        self.assertEqual((res.decision, res.code), ("deny", "no-drop"))
        # A named parameter wins over the same key in extra.
        res = c.evaluate("Read", session_id="s-1", agent_id="coder-1",
                         extra={"tool_name": "Write", "agent_id": "Billing-Bot-7"})
        self.assertEqual((res.decision, res.matched_rule_id), ("allow", "read-only-tools"))


class NoBundleTest(unittest.TestCase):
    def test_no_policies(self) -> None:
        sc = start_sidecar(self)  # --bundle-file names a file that does not exist
        for url in (sc.tcp, sc.unix):
            c = toolgate.Client(url)
            self.addCleanup(c.close)
            res = c.evaluate("Read", session_id="s-1")
            self.assertEqual((res.decision, res.code), ("deny", "NO_POLICIES"), url)
            self.assertEqual(c.fail_open_count, 0)


class ConformanceTest(unittest.TestCase):
    """config/samples/expected-decisions.json: every client decides these
    identically through the same sidecar."""

    def test_expected_decisions(self) -> None:
        with open(SAMPLES / "expected-decisions.json") as f:
            doc = json.load(f)
        cases = [c for c in doc["cases"] if "now" not in c]
        self.assertGreater(len(cases), 0, "no case without \"now\": the file is empty or misread")
        sc = start_sidecar(self, sample_bundle())
        c = toolgate.Client(sc.unix)
        self.addCleanup(c.close)
        ran = 0
        for case in cases:
            with self.subTest(case["request"]):
                with open(SAMPLES / "requests" / case["request"]) as f:
                    req = json.load(f)
                extra = {k: v for k, v in req.items() if k not in (
                    "tool_name", "session_id", "agent_id", "framework", "tool_use_id", "input", "args", "kwargs")}
                res = c.evaluate(
                    req["tool_name"],
                    session_id=req.get("session_id", ""),
                    agent_id=req.get("agent_id"),
                    framework=req.get("framework"),
                    metadata=EvaluationMetadata(input=req.get("input"), args=req.get("args"),
                                                kwargs=req.get("kwargs"), tool_use_id=req.get("tool_use_id")),
                    extra=extra or None,
                )
                want = case["expect"]
                # The file has the wire's names; the result, their snake_case.
                got = {k: getattr(res, re.sub("([A-Z])", r"_\1", k).lower()) for k in want}
                want = dict(want)
                if want["code"] is None and want["decision"] == "deny" and want["matchedRuleId"]:
                    want["code"] = want["matchedRuleId"]  # the client's rule-deny mapping
                self.assertEqual(got, want)
                ran += 1
        self.assertEqual(ran, len(cases))


class TraceTest(unittest.TestCase):
    def test_traceparent_reaches_the_decision_log(self) -> None:
        sc = start_sidecar(self, sample_bundle(), decision_log="stdout")

        class Span:
            traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

        c = toolgate.Client(sc.unix)
        self.addCleanup(c.close)
        c.evaluate("Read", session_id="t-str", trace=TRACEPARENT)
        c.evaluate("Read", session_id="t-obj", trace=Span())
        c.evaluate("Read", session_id="t-map", trace={"traceparent": TRACEPARENT})
        with self.assertLogs("toolgate", logging.WARNING) as logs:
            res = c.evaluate("Read", session_id="t-bad", trace="00-not-a-trace-01")
        self.assertEqual(res.decision, "allow", "a malformed trace must not change the decision")
        self.assertIn("not a W3C traceparent", logs.output[0])
        c.evaluate("Read", session_id="t-none")
        sc.stop()  # flushes the decision log
        lines = {line["session_id"]: line for line in sc.decision_log()}
        self.assertEqual(set(lines), {"t-str", "t-obj", "t-map", "t-bad", "t-none"})
        for sid in ("t-str", "t-map"):
            self.assertEqual((lines[sid].get("trace_id"), lines[sid].get("span_id")),
                             ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"), sid)
        self.assertEqual((lines["t-obj"].get("trace_id"), lines["t-obj"].get("span_id")),
                         ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"))
        for sid in ("t-bad", "t-none"):
            self.assertNotIn("trace_id", lines[sid], sid)


if __name__ == "__main__":
    unittest.main()
