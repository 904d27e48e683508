"""A caller's mistakes raise ValueError or TypeError before anything is
sent: they are programming errors, not a sidecar that gave no decision."""

from __future__ import annotations

import logging
import math
import unittest

import toolgate
from toolgate import EvaluationMetadata

from .support import ALLOW, BrokenPeer, http_answer


class ArgumentsTest(unittest.TestCase):
    def setUp(self) -> None:
        # A peer answering allow to anything, which records what was sent.
        self.peer = BrokenPeer(http_answer(200, ALLOW))
        self.addCleanup(self.peer.close)
        self.c = toolgate.Client(self.peer.url, fail_open=True)
        self.addCleanup(self.c.close)

    def tearDown(self) -> None:
        self.assertEqual(self.c.fail_open_count, 0)

    def test_tool_name(self) -> None:
        with self.assertRaisesRegex(ValueError, "tool_name is empty"):
            self.c.evaluate("", session_id="s")
        with self.assertRaisesRegex(TypeError, "tool_name must be a str"):
            self.c.evaluate(None, session_id="s")  # type: ignore[arg-type]
        self.assertEqual(self.peer.requests, [])

    def test_field_types(self) -> None:
        for kw in ({"session_id": 1}, {"session_id": "s", "agent_id": 7}, {"session_id": "s", "framework": b"x"},
                   {"session_id": "s", "metadata": {"input": {}}}, {"session_id": "s", "extra": ["roles"]},
                   {"session_id": "s", "metadata": EvaluationMetadata(tool_use_id=3)}):  # type: ignore[arg-type]
            with self.subTest(kw), self.assertRaises(TypeError):
                self.c.evaluate("Read", **kw)
        self.assertEqual(self.peer.requests, [])

    def test_arguments_that_are_not_json(self) -> None:
        for md, cls in ((EvaluationMetadata(input={"f": object()}), TypeError),
                        (EvaluationMetadata(args=[{1, 2}]), TypeError),
                        (EvaluationMetadata(kwargs={"amount": math.nan}), ValueError),
                        (EvaluationMetadata(kwargs={"amount": math.inf}), ValueError)):
            with self.subTest(md), self.assertRaisesRegex(cls, "does not encode as JSON"):
                self.c.evaluate("pay", session_id="s", metadata=md)
        loop: dict = {}
        loop["self"] = loop
        with self.assertRaisesRegex(ValueError, "does not encode as JSON"):
            self.c.evaluate("pay", session_id="s", metadata=EvaluationMetadata(input=loop))
        self.assertEqual(self.peer.requests, [])

    def test_trace(self) -> None:
        with self.assertRaisesRegex(TypeError, "trace"):
            self.c.evaluate("Read", session_id="s", trace=42)
        with self.assertRaisesRegex(TypeError, "traceparent must be a str"):
            self.c.evaluate("Read", session_id="s", trace={"traceparent": 1})
        good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        bad = [
            "", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            good + "-extra",  # version 00 has exactly four fields
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nX-Injected: 1",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-\u00e9",
        ]
        for tp in bad:
            with self.subTest(tp), self.assertLogs("toolgate", logging.WARNING):
                self.assertEqual(self.c.evaluate("Read", session_id="s", trace=tp).decision, "allow")
        self.c.evaluate("Read", session_id="s", trace=" " + good + " ")
        self.c.evaluate("Read", session_id="s", trace="01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future")
        self.c.evaluate("Read", session_id="s", trace={"traceparent": None})  # no trace: nothing sent
        sent = [r for r in self.peer.requests if b"traceparent" in r.lower()]
        self.assertEqual(len(self.peer.requests), len(bad) + 3)
        self.assertEqual([r.split(b"traceparent: ", 1)[1].split(b"\r\n", 1)[0] for r in sent],
                         [good.encode(), b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future"])

    def test_what_is_sent(self) -> None:
        self.c.evaluate("pay", session_id="s-1", agent_id="a-1", framework="fw",
                        metadata=EvaluationMetadata(input={"x": "\u00e9"}, args=[1, (2, 3)], kwargs={"k": None},
                                                    tool_use_id="t-1"),
                        extra={"roles": ["r"], "session_id": "overridden"})
        (req,) = self.peer.requests
        head, _, body = req.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        self.assertEqual(lines[0], "POST /v1/evaluate HTTP/1.1")
        self.assertIn("Content-Type: application/json", lines)
        self.assertIn("Content-Length: %d" % len(body), lines)
        import json
        self.assertEqual(json.loads(body), {
            "tool_name": "pay", "session_id": "s-1", "agent_id": "a-1", "framework": "fw", "tool_use_id": "t-1",
            "input": {"x": "\u00e9"}, "args": [1, [2, 3]], "kwargs": {"k": None}, "roles": ["r"]})
        # Empty strings and None are not sent.
        self.c.evaluate("Read", session_id="", agent_id=None)
        self.assertEqual(json.loads(self.peer.requests[1].partition(b"\r\n\r\n")[2]), {"tool_name": "Read"})


if __name__ == "__main__":
    unittest.main()
