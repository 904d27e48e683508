"""evaluate_result: what a tool returned, judged by result rules in the
real sidecar (clients/testdata/results.yaml), and the guard judging what
its tool returns."""

from __future__ import annotations

import asyncio
import json
import logging
import unittest

import toolgate
from toolgate import SIDECAR_UNAVAILABLE, EvaluationMetadata

from .support import BrokenPeer, http_answer, results_bundle, start_class_sidecar, start_sidecar

KEY = "AKIAIOSFODNN7EXAMPLE"
MARK = "[REDACTED:aws-key]"
READ = EvaluationMetadata(input={"path": "/creds"})


def quiet(test: unittest.TestCase) -> None:
    log = logging.getLogger("toolgate")
    test.addCleanup(log.setLevel, log.level)
    log.setLevel(logging.CRITICAL)


class BuildOutputTest(unittest.TestCase):
    """The output object, as the hook and the Go client build it."""

    def test_shapes(self) -> None:
        b = toolgate.build_output
        self.assertEqual(b("é"), {"isError": False, "text": "é", "size": 2})
        self.assertEqual(b({"b": 1, "a": "<x>"}),
                         {"isError": False, "structured": {"a": "<x>", "b": 1}, "text": '{"a":"<x>","b":1}', "size": 17})
        self.assertEqual(b((1, "two")), {"isError": False, "structured": [1, "two"], "text": '[1,"two"]', "size": 9})
        self.assertEqual(b(5000), {"isError": False, "text": "5000", "size": 4})
        self.assertEqual(b(True), {"isError": False, "text": "true", "size": 4})
        self.assertEqual(b(None), {"isError": False, "text": "", "size": 0})
        self.assertEqual(b("boom", is_error=True)["isError"], True)

    def test_refuses(self) -> None:
        with self.assertRaisesRegex(TypeError, "the tool's output does not encode as JSON"):
            toolgate.build_output(object())
        with self.assertRaisesRegex(ValueError, "does not encode as JSON"):
            toolgate.build_output({"x": float("nan")})
        with self.assertRaisesRegex(TypeError, "is_error must be a bool"):
            toolgate.build_output("x", is_error="no")


class EvaluateResultTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.sc = start_class_sidecar(cls, results_bundle(), decision_log="stdout")
        cls.client = toolgate.Client(cls.sc.unix)
        cls.addClassCleanup(cls.client.close)

    def test_redact(self) -> None:
        for url in (self.sc.unix, self.sc.tcp):
            with toolgate.Client(url) as c:
                res = c.evaluate_result("read_file", "aws_access_key_id = %s\n" % KEY, metadata=READ, framework="python")
                self.assertTrue(res.allowed)
                self.assertTrue(res.redacted)
                self.assertEqual((res.effect, res.matched_rule_id), ("redact", "aws-key"))
                self.assertEqual(res.redacted_text, "aws_access_key_id = %s\n" % MARK)
                self.assertEqual(len(res.redactions), 1)
                self.assertEqual((res.redactions[0]["start"], res.redactions[0]["end"]), (20, 20 + len(KEY)))
                self.assertTrue(res.explanations)
        # The decision log says which rule and where, never what it hid.
        logged = self.sc.wait_decision_log(lambda e: e.get("phase") == "result", 1)
        self.assertEqual((logged[0]["matched_rule_id"], logged[0]["effect"]), ("aws-key", "redact"))
        self.assertNotIn(KEY, json.dumps(logged))

    def test_deny(self) -> None:
        res = self.client.evaluate_result("read_file", "CONFIDENTIAL: the merger", metadata=READ)
        self.assertFalse(res.allowed)
        self.assertEqual((res.decision, res.code, res.matched_rule_id), ("deny", "confidential", "confidential"))
        self.assertEqual(res.reason, "confidential documents stay in the company")
        self.assertIsNone(res.output)

    def test_structured(self) -> None:
        res = self.client.evaluate_result("query", {"count": 500, "rows": []})
        self.assertEqual((res.decision, res.matched_rule_id), ("deny", "too-many-rows"))
        res = self.client.evaluate_result("query", {"count": 1, "rows": [{"key": KEY}]})
        self.assertTrue(res.redacted)
        self.assertEqual(json.loads(res.redacted_text), {"count": 1, "rows": [{"key": MARK}]})

    def test_plain(self) -> None:
        res = self.client.evaluate_result("read_file", "hello")
        self.assertTrue(res.allowed)
        self.assertFalse(res.redacted)
        self.assertIsNone(res.output)

    def test_async(self) -> None:
        async def main():
            async with toolgate.AsyncClient(self.sc.tcp) as c:
                return (await c.evaluate_result("read_file", KEY), await c.evaluate_result("read_file", "CONFIDENTIAL"))

        redacted, denied = asyncio.run(main())
        self.assertEqual(redacted.redacted_text, MARK)
        self.assertEqual(denied.matched_rule_id, "confidential")

    def test_caller_mistakes(self) -> None:
        with self.assertRaisesRegex(ValueError, "tool_name is empty"):
            self.client.evaluate_result("", "x")
        with self.assertRaisesRegex(TypeError, "does not encode as JSON"):
            self.client.evaluate_result("read_file", object())
        with self.assertRaisesRegex(TypeError, "is_error must be a bool"):
            self.client.evaluate_result("read_file", "x", is_error=1)

    def test_fails_closed(self) -> None:
        quiet(self)
        # Past the sidecar's request limit: refused (a 400, or the
        # connection closed on the rest of the body), so denied.
        res = self.client.evaluate_result("read_file", "x" * (2 << 20))
        self.assertEqual((res.decision, res.code), ("deny", SIDECAR_UNAVAILABLE))
        # A redact answer that is not a decision (output not an object).
        bad = http_answer(200, b'{"decision":"allow","effect":"redact","latencyMs":0,"output":"' + KEY.encode() + b'"}')
        peer = BrokenPeer(bad, unix=False)
        self.addCleanup(peer.close)
        with toolgate.Client(peer.url) as c:
            res = c.evaluate_result("read_file", KEY)
        self.assertEqual((res.decision, res.code), ("deny", SIDECAR_UNAVAILABLE))


class GuardResultTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.sc = start_class_sidecar(cls, results_bundle())
        cls.client = toolgate.Client(cls.sc.unix)
        cls.addClassCleanup(cls.client.close)

    def test_sync(self) -> None:
        @toolgate.guard(self.client, framework="python")
        def read_file(path):
            return {"/creds": "key=" + KEY, "/plan": "CONFIDENTIAL plan", "/readme": "hello"}[path]

        @toolgate.guard(self.client, framework="python")
        def query(sql):
            return {"count": 1, "rows": [{"key": KEY}]} if sql == "one" else {"count": 500, "rows": []}

        self.assertEqual(read_file("/creds"), "key=" + MARK)
        self.assertEqual(read_file("/readme"), "hello")
        self.assertEqual(query("one"), {"count": 1, "rows": [{"key": MARK}]})
        with self.assertRaises(toolgate.ToolDenied) as cm:
            read_file("/plan")
        self.assertTrue(cm.exception.of_result)
        self.assertEqual(str(cm.exception), "toolgate withheld the result of read_file: confidential: confidential documents stay in the company")
        with self.assertRaises(toolgate.ToolDenied) as cm:
            query("all")
        self.assertEqual(cm.exception.result.matched_rule_id, "too-many-rows")

        @toolgate.guard(self.client, judge_result=False)
        def read_raw(path):
            return "key=" + KEY

        self.assertEqual(read_raw("/creds"), "key=" + KEY)

    def test_async(self) -> None:
        aclient = toolgate.AsyncClient(self.sc.tcp)

        @toolgate.guard(aclient)
        async def read_file(path):
            return "key=" + KEY if path == "/creds" else "CONFIDENTIAL"

        @toolgate.guard(self.client)
        async def read_thread(path):
            return "key=" + KEY

        async def main():
            try:
                got = await read_file("/creds")
                with self.assertRaises(toolgate.ToolDenied) as cm:
                    await read_file("/plan")
                return got, cm.exception, await read_thread("/creds")
            finally:
                await aclient.close()

        got, denied, threaded = asyncio.run(main())
        self.assertEqual(got, "key=" + MARK)
        self.assertTrue(denied.of_result)
        self.assertEqual(threaded, "key=" + MARK)

    def test_sidecar_gone(self) -> None:
        quiet(self)
        sc = start_sidecar(self, results_bundle())
        c = toolgate.Client(sc.tcp)
        self.addCleanup(c.close)
        ran = []

        @toolgate.guard(c)
        def read_file(path):
            ran.append(path)
            sc.kill()  # gone between the call and its result
            return "hello"

        with self.assertRaises(toolgate.ToolDenied) as cm:
            read_file("/readme")
        self.assertEqual(ran, ["/readme"])
        self.assertTrue(cm.exception.of_result)
        self.assertEqual(cm.exception.result.code, SIDECAR_UNAVAILABLE)


if __name__ == "__main__":
    unittest.main()
