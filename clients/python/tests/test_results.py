"""A result's attributes are snake_case; the wire's camelCase names of
earlier versions still read, with a DeprecationWarning."""

from __future__ import annotations

import unittest
import warnings

import toolgate

from .support import sample_bundle, start_class_sidecar

SNAKE_OF_CAMEL = {
    "matchedPolicyId": "matched_policy_id",
    "matchedPolicyVersion": "matched_policy_version",
    "matchedRuleId": "matched_rule_id",
    "latencyMs": "latency_ms",
    "bundleRevision": "bundle_revision",
    "decisionId": "decision_id",
}


class ResultsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.sc = start_class_sidecar(cls, sample_bundle())

    def test_result_attributes_are_snake_case(self) -> None:
        c = toolgate.Client(self.sc.unix)
        self.addCleanup(c.close)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            res = c.evaluate("Bash", agent_id="coder-1",
                             metadata=toolgate.EvaluationMetadata(input={"command": "rm -rf /"}))
            self.assertEqual((res.matched_policy_id, res.matched_policy_version, res.matched_rule_id),
                             ("bash-no-rm-rf", 1, "no-rm-rf"))
            self.assertIsInstance(res.latency_ms, float)
            self.assertTrue(res.bundle_revision.startswith("sha256:"))
            self.assertTrue(res.decision_id)
        fields = set(res.__dataclass_fields__)
        self.assertEqual({f for f in fields if f.lower() != f}, set(), "every field is snake_case")
        self.assertTrue(set(SNAKE_OF_CAMEL.values()) <= fields)

    def test_camel_case_attributes_are_deprecated_aliases(self) -> None:
        res = toolgate.EvaluationResult("deny", "r", "rule-1", "pol", 3, "rule-1", 0.5, "deny", None, "sha256:x", "d-1")
        for camel, snake in SNAKE_OF_CAMEL.items():
            with self.subTest(camel):
                with self.assertWarnsRegex(DeprecationWarning, "EvaluationResult.%s is deprecated, use .%s"
                                           % (camel, snake)) as cm:
                    value = getattr(res, camel)
                self.assertEqual(value, getattr(res, snake))
                self.assertEqual(cm.filename, __file__, "the warning points at the caller's line")


if __name__ == "__main__":
    unittest.main()
