"""What Client and AsyncClient share besides the wire: their settings, the
per-client session id, and how a call without a decision is settled (fail
closed, or open when asked)."""

from __future__ import annotations

import threading
import uuid
from typing import Any, Dict, Mapping, Optional

from ._discover import Endpoint, discover
from ._result import EvaluationMetadata, EvaluationResult, from_answer, unavailable
from ._wire import (
    NoAnswer,
    Trace,
    check_timeout,
    clip,
    encode_request,
    logger,
    request_head,
    request_message,
    traceparent,
)


class ClientBase:
    """The settings and the settling every toolgate client shares."""

    def __init__(
        self,
        url: Optional[str],
        timeout: float,
        fail_open: bool,
        session_id: Optional[str],
        who: str,
    ) -> None:
        self._timeout = check_timeout(timeout, who)
        if session_id is None:
            # One session per client: per-session limits and the decision
            # log then tell this client's calls apart from another's.
            session_id = uuid.uuid4().hex
        elif type(session_id) is not str:
            raise TypeError("toolgate: %s(session_id=...) must be a str or None, not %s" % (who, type(session_id).__name__))
        elif not session_id:
            raise ValueError("toolgate: %s(session_id=''): leave it out (None) for one generated per client" % who)
        self._session_id = session_id
        self._endpoint: Endpoint = discover(url)
        self._url = str(self._endpoint)
        self._fail_open = bool(fail_open)
        self._head = request_head(self._endpoint)
        self._count_lock = threading.Lock()
        self._fail_open_count = 0

    @property
    def url(self) -> str:
        """The sidecar this client asks, as unix:///path or http://host:port."""
        return self._url

    @property
    def timeout(self) -> float:
        return self._timeout

    @property
    def fail_open(self) -> bool:
        return self._fail_open

    @property
    def session_id(self) -> str:
        """The session_id sent when evaluate() is given none: the one this
        client was made with, else one generated for it (uuid4 hex)."""
        return self._session_id

    @property
    def fail_open_count(self) -> int:
        """How many calls were allowed because fail_open is set and the
        sidecar gave no decision."""
        return self._fail_open_count

    def __repr__(self) -> str:
        return "toolgate.%s(%r, timeout=%r, fail_open=%r, session_id=%r)" % (
            type(self).__name__, self._url, self._timeout, self._fail_open, self._session_id)

    def _message(
        self,
        tool_name: str,
        session_id: Optional[str],
        agent_id: Optional[str],
        metadata: Optional[EvaluationMetadata],
        framework: Optional[str],
        trace: Trace,
        extra: Optional[Mapping[str, Any]],
        wait: float = 0.0,
        approval: Optional[str] = None,
        output: Optional[Dict[str, Any]] = None,
    ) -> bytes:
        """The whole request for one evaluate() (or evaluate_result(), with
        the output build_output made); raises for a caller's mistake before
        anything is sent. session_id None is the client's; "" sends none.
        wait is checked seconds (check_wait)."""
        if session_id is None:
            session_id = self._session_id
        body = encode_request(tool_name, session_id, agent_id, metadata, framework, extra, wait, approval, output)
        return request_message(self._head, body, traceparent(trace))

    def _settle(self, tool_name: str, answer: Any, no_answer: Optional[NoAnswer]) -> EvaluationResult:
        """The result of a call: the sidecar's decision, else the client's
        own deny (or allow, with fail_open) with code SIDECAR_UNAVAILABLE."""
        if no_answer is not None:
            why = str(no_answer)
        else:
            res = from_answer(answer)
            if res is not None:
                return res
            why = "the answer is not a decision: " + clip(repr(answer))
        if self._fail_open:
            with self._count_lock:
                self._fail_open_count += 1
            logger.warning(
                "toolgate: %s allowed (fail open): the sidecar at %s gave no decision: %s", tool_name, self._url, why
            )
            return unavailable("allow", "toolgate sidecar at %s gave no decision, allowed (fail open): %s" % (self._url, why))
        logger.warning(
            "toolgate: %s denied (fail closed): the sidecar at %s gave no decision: %s", tool_name, self._url, why
        )
        return unavailable("deny", "toolgate sidecar at %s gave no decision, denied (fail closed): %s" % (self._url, why))


__all__ = ["ClientBase"]
