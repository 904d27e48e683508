"""The client: asks the sidecar for decisions over kept-alive connections."""

from __future__ import annotations

import http.client
import json
import logging
import os
import re
import socket
import threading
import time
import weakref
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from ._discover import Endpoint, discover
from ._result import (
    EvaluationMetadata,
    EvaluationResult,
    from_answer,
    unavailable,
)

logger = logging.getLogger("toolgate")

#: Bounds one evaluate(): the sidecar decides in microseconds, so half a
#: second means it is not answering, and an agent should not hang.
DEFAULT_TIMEOUT = 0.5

# A decision is well under 1 KiB; more is not a decision.
_MAX_ANSWER = 1 << 20

# W3C Trace Context: version-traceid-parentid-flags, lower-case hex; a
# version other than 00 may carry more fields after the flags. All-zero ids
# and version ff are invalid.
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-[!-~]*)?")

# What a kept-alive connection the peer closed while idle raises on reuse:
# the sidecar closes idle connections (--idle-timeout), so the next call
# finds it gone before the request was read, and one retry on a new
# connection is safe.
_DROPPED = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError, http.client.RemoteDisconnected)

_RECV = 65536
_MAX_HEAD = 64 * 1024

_encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
_decode = json.JSONDecoder().decode

# Bumped in a forked child, so it never shares its parent's sockets.
_generation = 0


def _after_fork() -> None:
    global _generation
    _generation += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)

_Trace = Union[str, Mapping[str, Any], Any, None]


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


class _NoAnswer(Exception):
    """Why the sidecar gave no decision."""


class Client:
    """Asks a toolgate sidecar whether tool calls may run.

    ``url`` is ``unix:///path/to.sock``, ``unix:/path/to.sock`` or
    ``http(s)://host:port[/prefix]``; None (or "") finds the sidecar as every
    toolgate client does: ``TOOLGATE_URL``, else the socket
    ``/var/run/toolgate/toolgate.sock`` if it exists, else
    ``http://127.0.0.1:8181``. A URL the client cannot read raises
    ValueError (naming the setting) here; nothing connects until the first
    evaluate().

    ``timeout`` (seconds) bounds each evaluate(), a reconnect included.

    The client is safe to share between threads: each thread keeps one
    connection of its own alive across calls.

    Fail closed: when the sidecar gives no decision (unreachable, past the
    timeout, a non-200 status, an answer that is not a decision) evaluate()
    does not raise: it returns a deny with code ``SIDECAR_UNAVAILABLE`` and
    the cause in ``reason``. With ``fail_open=True`` it returns an allow with
    that code instead, logs a warning and counts it in ``fail_open_count``.
    """

    def __init__(self, url: Optional[str] = None, *, timeout: float = DEFAULT_TIMEOUT, fail_open: bool = False) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise TypeError("toolgate: Client(timeout=...) must be a number of seconds, not %r" % (timeout,))
        if not timeout > 0 or timeout == float("inf"):
            raise ValueError("toolgate: Client(timeout=%r): want a finite number of seconds above 0" % (timeout,))
        self._endpoint: Endpoint = discover(url)
        self._url = str(self._endpoint)
        self._path = self._endpoint.prefix + "/v1/evaluate"
        self._timeout = float(timeout)
        self._fail_open = bool(fail_open)
        self._local = threading.local()
        self._lock = threading.Lock()
        # Every thread's connection, for close(); a thread's ends with it.
        self._conns: "weakref.WeakSet[http.client.HTTPConnection]" = weakref.WeakSet()
        self._fail_open_count = 0
        ep = self._endpoint
        if ep.scheme == "unix":
            host = "localhost"
        else:
            host = "[" + ep.host + "]" if ":" in ep.host else ep.host
            if ep.port is not None:
                host += ":%d" % ep.port
        # Every request's head up to the body's length.
        self._head = (
            "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: " % (self._path, host)
        ).encode("ascii")

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
    def fail_open_count(self) -> int:
        """How many calls were allowed because fail_open is set and the
        sidecar gave no decision."""
        return self._fail_open_count

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

    def __repr__(self) -> str:
        return "toolgate.Client(%r, timeout=%r, fail_open=%r)" % (self._url, self._timeout, self._fail_open)

    def evaluate(
        self,
        tool_name: str,
        *,
        session_id: str,
        agent_id: Optional[str] = None,
        metadata: Optional[EvaluationMetadata] = None,
        framework: Optional[str] = None,
        trace: _Trace = None,
        extra: Optional[Mapping[str, Any]] = None,
    ) -> EvaluationResult:
        """Asks the sidecar whether ``tool_name`` may run.

        ``metadata`` carries the call's arguments (``input``, ``args``,
        ``kwargs``) and ``tool_use_id``; ``extra`` any other top-level
        request field policies read (``roles``, ``side_effect``, ...; a
        named parameter wins over the same key there). ``trace`` is a W3C
        traceparent string, or an object or mapping with a ``traceparent``:
        it is sent as the traceparent header, so the decision log line
        carries its trace and span ids; a malformed one is logged and not
        sent (a trace never changes a decision).

        Never raises because of the sidecar (see the class). It raises
        ValueError or TypeError only for a caller's mistake, before
        anything is sent: an empty or non-str ``tool_name``, a parameter of
        the wrong type, or arguments that do not encode as JSON.
        """
        body = self._body(tool_name, session_id, agent_id, metadata, framework, extra)
        traceparent = _traceparent(trace)
        try:
            d = self._post(body, traceparent)
        except _NoAnswer as e:
            why = str(e)
        else:
            res = from_answer(d)
            if res is not None:
                return res
            why = "the answer is not a decision: " + _clip(repr(d))
        if self._fail_open:
            with self._lock:
                self._fail_open_count += 1
            logger.warning(
                "toolgate: %s allowed (fail open): the sidecar at %s gave no decision: %s", tool_name, self._url, why
            )
            return unavailable("allow", "toolgate sidecar at %s gave no decision, allowed (fail open): %s" % (self._url, why))
        logger.warning(
            "toolgate: %s denied (fail closed): the sidecar at %s gave no decision: %s", tool_name, self._url, why
        )
        return unavailable("deny", "toolgate sidecar at %s gave no decision, denied (fail closed): %s" % (self._url, why))

    def _body(
        self,
        tool_name: Any,
        session_id: Any,
        agent_id: Any,
        metadata: Any,
        framework: Any,
        extra: Any,
    ) -> bytes:
        if type(tool_name) is not str:
            raise TypeError("toolgate: evaluate() tool_name must be a str, not %s" % type(tool_name).__name__)
        if not tool_name:
            raise ValueError("toolgate: evaluate() tool_name is empty: every decision is about a named tool")
        if extra is None:
            req: Dict[str, Any] = {"tool_name": tool_name}
        elif isinstance(extra, Mapping):
            req = dict(extra)
            req["tool_name"] = tool_name
        else:
            raise TypeError("toolgate: evaluate() extra must be a mapping of request fields, not %s" % type(extra).__name__)
        _set_str(req, "session_id", session_id)
        _set_str(req, "agent_id", agent_id)
        _set_str(req, "framework", framework)
        if metadata is not None:
            if not isinstance(metadata, EvaluationMetadata):
                raise TypeError(
                    "toolgate: evaluate() metadata must be a toolgate.EvaluationMetadata, not %s"
                    % type(metadata).__name__
                )
            if metadata.input is not None:
                req["input"] = metadata.input
            if metadata.args is not None:
                req["args"] = metadata.args
            if metadata.kwargs is not None:
                req["kwargs"] = metadata.kwargs
            _set_str(req, "tool_use_id", metadata.tool_use_id)
        try:
            return _encode(req).encode()
        except (TypeError, ValueError, RecursionError) as e:
            cls = TypeError if isinstance(e, TypeError) else ValueError
            raise cls("toolgate: the request to evaluate %r does not encode as JSON: %s" % (tool_name, e)) from e

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

    def _post(self, body: bytes, traceparent: Optional[str]) -> Any:
        """Sends one request and returns the decoded 200 answer; raises
        _NoAnswer saying why there is none."""
        conn = self._conn()
        # One write per request: the head and the body in one buffer, so a
        # small request is one packet and one wake-up of the sidecar.
        msg = self._head + b"%d\r\n" % len(body)
        if traceparent is not None:
            msg += b"traceparent: " + traceparent.encode("ascii") + b"\r\n"
        msg += b"\r\n" + body
        deadline = time.monotonic() + self._timeout
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
                raise _NoAnswer("no answer within %gs" % self._timeout) from None
            except _DROPPED as e:
                conn.close()
                connect_timeout = deadline - time.monotonic()
                if not reused or connect_timeout <= 0:
                    raise _NoAnswer(_describe(e)) from None
                # The kept-alive connection was closed while idle: one new
                # connection, within what is left of the budget.
                reused = False
            except (OSError, http.client.HTTPException, ValueError) as e:
                conn.close()
                raise _NoAnswer(_describe(e)) from None
            except Exception as e:  # noqa: BLE001 - whatever went wrong, the answer is no decision
                conn.close()
                raise _NoAnswer("unexpected " + _describe(e)) from None
        if not reused and conn.sock is not None:
            # A connection made by the retry may carry a shorter timeout.
            conn.sock.settimeout(self._timeout)
        if status != 200:
            # The sidecar's 400 names what is wrong in {"error": ...}.
            try:
                err = _decode(data.decode())
            except ValueError:
                err = None
            if type(err) is dict and type(err.get("error")) is str and err["error"]:
                raise _NoAnswer("status %d: %s" % (status, _clip(err["error"])))
            raise _NoAnswer("status %d" % status)
        try:
            return _decode(data.decode())
        except ValueError as e:  # UnicodeDecodeError is one
            raise _NoAnswer("the answer is not JSON: %s: %s" % (e, _clip(repr(data)))) from None


class _Reader:
    """Reads the rest of an answer that did not come in one piece, each
    read bounded by what is left of the call's deadline (so a peer
    trickling bytes cannot stretch a call past its timeout)."""

    __slots__ = ("sock", "deadline", "timeout", "shortened")

    def __init__(self, sock: socket.socket, deadline: float, timeout: float) -> None:
        self.sock, self.deadline, self.timeout, self.shortened = sock, deadline, timeout, False

    def __call__(self, n: int = _RECV) -> bytes:
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
    """Writes one request on conn's socket and reads one HTTP/1.x answer:
    its status and body (framed by Content-Length, chunked, or the end of
    the connection). conn is closed when the answer says so."""
    sock = conn.sock
    sock.sendall(msg)
    # The first read waits up to the whole timeout (the call started
    # microseconds ago); any further one only for what is left of it.
    buf = sock.recv(_RECV)
    recv = _Reader(sock, deadline, timeout)
    try:
        return _parse(conn, buf, recv)
    finally:
        if conn.sock is not None:
            recv.restore()


def _parse(conn: http.client.HTTPConnection, buf: bytes, recv: Any) -> Tuple[int, bytes]:
    """Parses the answer whose first bytes are buf; recv reads more."""
    if not buf:
        raise http.client.RemoteDisconnected("the connection closed without an answer")
    while True:
        i = buf.find(b"\r\n\r\n")
        if i >= 0:
            break
        if len(buf) > _MAX_HEAD:
            raise http.client.HTTPException("an answer head over %d bytes" % _MAX_HEAD)
        more = recv(_RECV)
        if not more:
            raise http.client.IncompleteRead(buf)
        buf += more
    lines = buf[:i].decode("latin-1").split("\r\n")
    rest = buf[i + 4:]
    version, _, code = lines[0].partition(" ")
    code = code[:3]
    if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise http.client.BadStatusLine(_clip(lines[0]))
    status = int(code)
    length = -1
    chunked = False
    close = version == "HTTP/1.0"
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise http.client.HTTPException("a malformed answer header %r" % _clip(line))
        name = name.strip().lower()
        if name == "content-length":
            value = value.strip()
            if not value.isdigit():
                raise http.client.HTTPException("Content-Length %r" % _clip(value))
            length = int(value)
        elif name == "transfer-encoding":
            chunked = "chunked" in value.lower()
        elif name == "connection":
            v = value.lower()
            if "close" in v:
                close = True
            elif "keep-alive" in v:
                close = False
    if status < 200 or status in (204, 304):
        # No body; a 1xx is not what this client asked for.
        data = b""
        close = close or status < 200
    elif chunked:
        data, extra = _read_chunked(recv, rest)
        # Bytes past the answer would be read as the next one's start.
        close = close or extra
    elif length >= 0:
        if length > _MAX_ANSWER:
            raise http.client.HTTPException("status %d, an answer of %d bytes" % (status, length))
        data = rest
        while len(data) < length:
            more = recv(max(length - len(data), _RECV))
            if not more:
                raise http.client.IncompleteRead(data, length - len(data))
            data += more
        if len(data) > length:
            close = True  # more than the answer: nothing after it can be trusted
            data = data[:length]
    else:
        # Framed by the end of the connection.
        data = rest
        while True:
            more = recv(_RECV)
            if not more:
                break
            data += more
            if len(data) > _MAX_ANSWER:
                raise http.client.HTTPException("status %d, an answer over %d bytes" % (status, _MAX_ANSWER))
        close = True
    if close:
        conn.close()
    return status, data


def _read_chunked(recv: Any, buf: bytes) -> Tuple[bytes, bool]:
    """The body of a chunked answer, and whether bytes came after it."""
    out = b""
    while True:
        while b"\r\n" not in buf:
            more = recv(_RECV)
            if not more:
                raise http.client.IncompleteRead(out)
            buf += more
        line, _, buf = buf.partition(b"\r\n")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise http.client.HTTPException("a malformed chunk size %r" % _clip(repr(line))) from None
        if size == 0:
            # Trailers, up to the empty line.
            while not (buf.startswith(b"\r\n") or b"\r\n\r\n" in buf):
                more = recv(_RECV)
                if not more:
                    raise http.client.IncompleteRead(out)
                buf += more
            end = 2 if buf.startswith(b"\r\n") else buf.index(b"\r\n\r\n") + 4
            return out, len(buf) > end
        if len(out) + size > _MAX_ANSWER:
            raise http.client.HTTPException("an answer over %d bytes" % _MAX_ANSWER)
        while len(buf) < size + 2:
            more = recv(_RECV)
            if not more:
                raise http.client.IncompleteRead(out)
            buf += more
        out += buf[:size]
        buf = buf[size + 2:]


def _set_str(req: Dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        return
    if type(value) is not str:
        raise TypeError("toolgate: evaluate() %s must be a str or None, not %s" % (key, type(value).__name__))
    if value:
        req[key] = value


def _traceparent(trace: _Trace) -> Optional[str]:
    """The traceparent header to send for trace, or None."""
    if trace is None:
        return None
    if isinstance(trace, str):
        tp: Any = trace
    elif isinstance(trace, Mapping):
        tp = trace.get("traceparent")
    else:
        tp = getattr(trace, "traceparent", _missing)
        if tp is _missing:
            raise TypeError(
                "toolgate: evaluate() trace must be a traceparent str, or an object or mapping with a "
                "traceparent, not %s" % type(trace).__name__
            )
        if callable(tp):
            tp = tp()
    if tp is None:
        return None
    if not isinstance(tp, str):
        raise TypeError("toolgate: evaluate() trace's traceparent must be a str, not %s" % type(tp).__name__)
    tp = tp.strip()
    m = _TRACEPARENT.fullmatch(tp)
    if (
        m is None
        or m.group(1) == "ff"
        or (m.group(1) == "00" and m.group(4) is not None)
        or m.group(2) == "0" * 32
        or m.group(3) == "0" * 16
    ):
        logger.warning("toolgate: traceparent %r is not a W3C traceparent; not sent", _clip(tp))
        return None
    return tp


_missing = object()


def _describe(e: BaseException) -> str:
    s = str(e)
    return type(e).__name__ + (": " + s if s else "")


def _clip(s: str, n: int = 200) -> str:
    return s if len(s) <= n else s[:n] + "..."
