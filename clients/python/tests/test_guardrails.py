"""The fields of cluster-wide guardrails (docs/guardrails.md, docs/exceptions.md)
read from the real sidecar deciding config/guardrails as the operator would
publish it for namespace payments (team=payments)."""

from __future__ import annotations

import datetime
import os
import subprocess
import unittest

import toolgate

from .support import SAMPLES, _tmp, start_class_sidecar, toolgate_bin

GUARDRAILS = os.path.join(os.path.dirname(str(SAMPLES)), "guardrails")


def guardrails_bundle() -> str:
    path = os.path.join(_tmp, "guardrails-bundle.json")
    with open(path, "wb") as f:
        subprocess.run([toolgate_bin(), "bundle", "-f", GUARDRAILS, "-n", "payments",
                        "--namespace-labels", "team=payments", "--now", "2026-12-01T10:00:00Z"], stdout=f, check=True)
    return path


class GuardrailsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.sc = start_class_sidecar(cls, guardrails_bundle())

    def test_level_exception_and_shadow(self) -> None:
        c = toolgate.Client(self.sc.unix)
        self.addCleanup(c.close)
        res = c.evaluate("Bash", agent_id="bot", metadata=toolgate.EvaluationMetadata(input={"command": "rm -rf /data"}))
        self.assertEqual((res.decision, res.code, res.matched_policy_kind), ("deny", "no-rm-rf", "ClusterPolicy"))
        self.assertIsNone(res.exception_applied)
        res = c.evaluate("Bash", agent_id="bot", metadata=toolgate.EvaluationMetadata(input={"command": "curl x"}))
        self.assertEqual((res.decision, res.matched_policy_kind), ("allow", "Policy"))
        self.assertEqual(res.shadow, [{"kind": "ClusterPolicy", "policy": "no-curl-candidate", "decision": "deny", "rule": "no-curl"}])
        # The exception's expiresAt (Dec 15 2026) is judged on the sidecar's
        # own clock, not the bundle's build time.
        res = c.evaluate("Bash", agent_id="migration-bot", metadata=toolgate.EvaluationMetadata(input={"command": "rm -rf /old"}))
        in_force = datetime.datetime.now(datetime.timezone.utc) < datetime.datetime(2026, 12, 15, tzinfo=datetime.timezone.utc)
        self.assertEqual(res.decision, "allow" if in_force else "deny")
        self.assertEqual(res.exception_applied, "storage-migration" if in_force else None)

    def test_malformed_fields_are_no_decision(self) -> None:
        from toolgate._result import from_answer
        ok = {"decision": "allow", "matchedPolicyKind": "Policy", "exceptionApplied": None, "shadow": []}
        self.assertIsNotNone(from_answer(ok))
        for bad in ({"matchedPolicyKind": 1}, {"exceptionApplied": ["x"]}, {"shadow": "x"}, {"shadow": [1]}):
            with self.subTest(bad):
                self.assertIsNone(from_answer({**ok, **bad}))


if __name__ == "__main__":
    unittest.main()
