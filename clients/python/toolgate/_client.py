"""The blocking client: asks the sidecar for decisions over kept-alive
connections, one per thread."""

from __future__ import annotations

import http.client
import os
import socket
import threading
import time
import weakref
from typing import Any, Mapping, Optional, Tuple

from ._base import ClientBase
from ._output import build_output
from ._result import EvaluationMetadata, EvaluationResult
from ._wire import DEFAULT_TIMEOUT, DROPPED, RECV, NoAnswer, Trace, answer_json, check_wait, describe, read_answer

# Bumped in a forked child, so it never shares its parent's sockets.
_generation = 0


def _after_fork() -> None:
    global _generation
    _generation += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


class _UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket; the host name only fills the Host header."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._path)
        except BaseException:
            s.close()
            raise
        self.sock = s


class _Held:
    """A thread's connection: closed when the thread ends (threading.local
    drops it) rather than left to the garbage collector."""

    __slots__ = ("conn", "gen")

    def __init__(self, conn: http.client.HTTPConnection) -> None:
        self.conn = conn
        self.gen = _generation

    def __del__(self) -> None:
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 - at interpreter exit anything may be gone
            pass


class Client(ClientBase):
    """Asks a toolgate sidecar whether tool calls may run.

    ``url`` is ``unix:///path/to.sock``, ``unix:/path/to.sock`` or
    ``http(s)://host:port[/prefix]``; None (or "") finds the sidecar as every
    toolgate client does: ``TOOLGATE_URL``, else the socket
    ``/var/run/toolgate/toolgate.sock`` if it exists, else
    ``http://127.0.0.1:8181``. A URL the client cannot read raises
    ValueError (naming the setting) here; nothing connects until the first
    evaluate().

    ``timeout`` (seconds) bounds each evaluate(), a reconnect included.

    ``session_id`` is sent with every call that names none; without it the
    client makes one (a uuid4 hex), so each client is a session of its own.

    The client is safe to share between threads: each thread keeps one
    connection of its own alive across calls.

    Fail closed: when the sidecar gives no decision (unreachable, past the
    timeout, a non-200 status, an answer that is not a decision) evaluate()
    does not raise: it returns a deny with code ``SIDECAR_UNAVAILABLE`` and
    the cause in ``reason``. With ``fail_open=True`` it returns an allow with
    that code instead, logs a warning and counts it in ``fail_open_count``.
    """

    def __init__(
        self,
        url: Optional[str] = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        fail_open: bool = False,
        session_id: Optional[str] = None,
    ) -> None:
        super().__init__(url, timeout, fail_open, session_id, "Client")
        self._local = threading.local()
        self._lock = threading.Lock()
        # Every thread's connection, for close(); a thread's ends with it.
        self._conns: "weakref.WeakSet[http.client.HTTPConnection]" = weakref.WeakSet()

    def close(self) -> None:
        """Closes every thread's kept-alive connection; a later evaluate()
        opens a new one."""
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            c.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def evaluate(
        self,
        tool_name: str,
        *,
        session_id: Optional[str] = None,
        agent_id: Optional[str] = None,
        metadata: Optional[EvaluationMetadata] = None,
        framework: Optional[str] = None,
        trace: Trace = None,
        extra: Optional[Mapping[str, Any]] = None,
        wait: Optional[float] = None,
        approval: Optional[str] = None,
    ) -> EvaluationResult:
        """Asks the sidecar whether ``tool_name`` may run.

        ``session_id`` defaults to the client's (``client.session_id``);
        ``""`` sends none. ``metadata`` carries the call's arguments
        (``input``, ``args``, ``kwargs``) and ``tool_use_id``; ``extra`` any
        other top-level request field policies read (``roles``,
        ``side_effect``, ...; a named parameter wins over the same key
        there). ``trace`` is a W3C traceparent string, or an object or
        mapping with a ``traceparent``: it is sent as the traceparent
        header, so the decision log line carries its trace and span ids; a
        malformed one is logged and not sent (a trace never changes a
        decision).

        A call an ask rule decides is answered ``decision == "ask"`` (not
        allowed; ``approval`` names its ApprovalRequest) at once, unless
        ``wait`` (seconds) asks the sidecar to hold the answer until a
        person approves or denies it, or the wait ends (the sidecar caps it
        at the rule's approval timeout): then the answer is an allow, or a
        deny with code ``APPROVAL_DENIED``, ``APPROVAL_TIMEOUT``, ... The
        call is bounded by ``timeout`` plus ``wait``. ``approval`` names the
        ApprovalRequest an earlier ask gave: this same call is decided
        against it (allowed once if approved, asked again while pending).

        Never raises because of the sidecar (see the class). It raises
        ValueError or TypeError only for a caller's mistake, before
        anything is sent: an empty or non-str ``tool_name``, a parameter of
        the wrong type, a negative ``wait``, or arguments that do not
        encode as JSON.
        """
        w = check_wait(wait, "evaluate()")
        msg = self._message(tool_name, session_id, agent_id, metadata, framework, trace, extra, w, approval)
        try:
            answer = self._post(msg, self._timeout + w)
        except NoAnswer as e:
            return self._settle(tool_name, None, e)
        return self._settle(tool_name, answer, None)

    def evaluate_result(
        self,
        tool_name: str,
        output: Any,
        *,
        is_error: bool = False,
        session_id: Optional[str] = None,
        agent_id: Optional[str] = None,
        metadata: Optional[EvaluationMetadata] = None,
        framework: Optional[str] = None,
        trace: Trace = None,
        extra: Optional[Mapping[str, Any]] = None,
    ) -> EvaluationResult:
        """Asks the sidecar to judge what ``tool_name`` returned, after it
        ran: ``output`` is the tool's return value (any JSON-encodable
        value: a str is the text; a dict or list is ``output.structured``
        and its JSON the text), the other parameters the call as
        evaluate() sent it. Only result rules run.

        Hand the result on only when ``allowed``: a deny withholds it
        (``reason`` says why). When ``redacted``, deliver
        ``redacted_text`` (``output["text"]``: every redacted span replaced
        by ``[REDACTED:<rule-id>]``), never the original.
        ``explanations`` say, per result rule that ran, whether it held
        and why.

        Fails closed as evaluate() does: no decision is a deny
        SIDECAR_UNAVAILABLE (an output past the sidecar's request limit,
        1 MiB, is refused and so denied). Raises TypeError or ValueError
        only for a caller's mistake, before anything is sent (an output
        that does not encode as JSON among them)."""
        out = build_output(output, is_error)
        msg = self._message(tool_name, session_id, agent_id, metadata, framework, trace, extra, output=out)
        try:
            answer = self._post(msg, self._timeout)
        except NoAnswer as e:
            return self._settle(tool_name, None, e)
        return self._settle(tool_name, answer, None)

    def _conn(self) -> http.client.HTTPConnection:
        """This thread's connection, made on first use (not yet connected)."""
        held = getattr(self._local, "held", None)
        if held is not None and held.gen == _generation:
            return held.conn
        # First use in this thread, or in a forked child, whose copy of the
        # parent's socket is closed (only here: the parent's stays open)
        # when the old holder goes.
        ep = self._endpoint
        if ep.scheme == "unix":
            conn: http.client.HTTPConnection = _UnixHTTPConnection(ep.socket, self._timeout)
        elif ep.scheme == "https":
            conn = http.client.HTTPSConnection(ep.host, ep.port, timeout=self._timeout)
        else:
            conn = http.client.HTTPConnection(ep.host, ep.port, timeout=self._timeout)
        self._local.held = _Held(conn)
        with self._lock:
            self._conns.add(conn)
        return conn

    def _post(self, msg: bytes, budget: float) -> Any:
        """Sends one request and returns the decoded 200 answer within
        budget seconds (the timeout, plus any wait for a person); raises
        NoAnswer saying why there is none."""
        conn = self._conn()
        deadline = time.monotonic() + budget
        reused = conn.sock is not None
        connect_timeout = self._timeout
        while True:
            try:
                if conn.sock is None:
                    conn.timeout = connect_timeout
                    try:
                        conn.connect()
                    finally:
                        conn.timeout = self._timeout
                status, data = _exchange(conn, msg, deadline, self._timeout)
                break
            except socket.timeout:
                # Never retried: the budget is spent.
                conn.close()
                raise NoAnswer("no answer within %gs" % budget) from None
            except DROPPED as e:
                conn.close()
                connect_timeout = deadline - time.monotonic()
                if not reused or connect_timeout <= 0:
                    raise NoAnswer(describe(e)) from None
                # The kept-alive connection was closed while idle: one new
                # connection, within what is left of the budget.
                reused = False
            except (OSError, http.client.HTTPException, ValueError) as e:
                conn.close()
                raise NoAnswer(describe(e)) from None
            except Exception as e:  # noqa: BLE001 - whatever went wrong, the answer is no decision
                conn.close()
                raise NoAnswer("unexpected " + describe(e)) from None
        if not reused and conn.sock is not None:
            # A connection made by the retry may carry a shorter timeout.
            conn.sock.settimeout(self._timeout)
        return answer_json(status, data)


class _Reader:
    """Reads the rest of an answer that did not come in one piece, each
    read bounded by what is left of the call's deadline (so a peer
    trickling bytes cannot stretch a call past its timeout)."""

    __slots__ = ("sock", "deadline", "timeout", "shortened")

    def __init__(self, sock: socket.socket, deadline: float, timeout: float) -> None:
        self.sock, self.deadline, self.timeout, self.shortened = sock, deadline, timeout, False

    def __call__(self, n: int = RECV) -> bytes:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("past the deadline")
        self.sock.settimeout(left)
        self.shortened = True
        return self.sock.recv(n)

    def restore(self) -> None:
        if self.shortened:
            self.sock.settimeout(self.timeout)


def _exchange(conn: http.client.HTTPConnection, msg: bytes, deadline: float, timeout: float) -> Tuple[int, bytes]:
    """Writes one request on conn's socket and reads one answer (the
    shared parser, read_answer): its status and body. conn is closed when
    the answer says so."""
    sock = conn.sock
    sock.sendall(msg)
    # The first read waits up to the whole timeout (the call started
    # microseconds ago), or up to the deadline when the call waits for a
    # person past it; any further one only for what is left of it.
    recv = _Reader(sock, deadline, timeout)
    left = deadline - time.monotonic()
    if left > timeout:
        sock.settimeout(left)
        recv.shortened = True
    try:
        first = sock.recv(RECV)
    except BaseException:
        recv.restore()
        raise
    reading = read_answer(first)
    try:
        n = next(reading)
        while True:
            n = reading.send(recv(n))
    except StopIteration as done:
        status, data, close = done.value
    finally:
        if conn.sock is not None:
            recv.restore()
    if close:
        conn.close()
    return status, data
