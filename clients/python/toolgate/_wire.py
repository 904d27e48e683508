"""What goes to the sidecar and what comes back, as bytes: the request's
encoding and the answer's parsing, shared by Client (blocking sockets) and
AsyncClient (asyncio streams). Neither does I/O here: read_answer is a
generator that asks its driver for more bytes, so both clients read an
answer through the very same parser."""

from __future__ import annotations

import http.client
import json
import logging
import re
from typing import Any, Dict, Generator, Mapping, Optional, Tuple, Union

from ._discover import Endpoint
from ._result import EvaluationMetadata

logger = logging.getLogger("toolgate")

#: Bounds one evaluate(): the sidecar decides in microseconds, so half a
#: second means it is not answering, and an agent should not hang.
DEFAULT_TIMEOUT = 0.5

# A call's decision is well under 1 KiB; a result's carries the output as
# delivered, at most the sidecar's request limit (1 MiB) grown by its
# redaction marks. More is not a decision.
MAX_ANSWER = 4 << 20
MAX_HEAD = 64 * 1024
RECV = 65536

# W3C Trace Context: version-traceid-parentid-flags, lower-case hex; a
# version other than 00 may carry more fields after the flags. All-zero ids
# and version ff are invalid.
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-[!-~]*)?")

_encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
_decode = json.JSONDecoder().decode

# What a kept-alive connection the peer closed while idle raises on reuse:
# the sidecar closes idle connections (--idle-timeout), so the next call
# finds it gone before the request was read, and one retry on a new
# connection is safe.
DROPPED = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError, http.client.RemoteDisconnected)

Trace = Union[str, Mapping[str, Any], Any, None]

#: What read_answer yields to its driver (the most bytes worth reading
#: next) and is sent back (the bytes read; b"" at the end of the stream).
Reading = Generator[int, bytes, Tuple[int, bytes, bool]]


class NoAnswer(Exception):
    """Why the sidecar gave no decision."""


def check_timeout(timeout: Any, who: str) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError("toolgate: %s(timeout=...) must be a number of seconds, not %r" % (who, timeout))
    if not timeout > 0 or timeout == float("inf"):
        raise ValueError("toolgate: %s(timeout=%r): want a finite number of seconds above 0" % (who, timeout))
    return float(timeout)


def request_head(ep: Endpoint) -> bytes:
    """Every request's head up to the body's length."""
    if ep.scheme == "unix":
        host = "localhost"
    else:
        host = "[" + ep.host + "]" if ":" in ep.host else ep.host
        if ep.port is not None:
            host += ":%d" % ep.port
    path = ep.prefix + "/v1/evaluate"
    return ("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: " % (path, host)).encode(
        "ascii"
    )


def request_message(head: bytes, body: bytes, traceparent: Optional[str]) -> bytes:
    """One request in one buffer, so a small request is one write, one
    packet and one wake-up of the sidecar."""
    msg = head + b"%d\r\n" % len(body)
    if traceparent is not None:
        msg += b"traceparent: " + traceparent.encode("ascii") + b"\r\n"
    return msg + b"\r\n" + body


def check_wait(wait: Any, who: str) -> float:
    """wait as seconds (0: do not wait); raises for what is not a finite
    number of seconds at or above 0."""
    if wait is None:
        return 0.0
    if isinstance(wait, bool) or not isinstance(wait, (int, float)):
        raise TypeError("toolgate: %s wait must be a number of seconds, not %r" % (who, wait))
    if not 0 <= wait < float("inf"):
        raise ValueError(
            "toolgate: %s wait=%r: want how many seconds to wait for a person's approval (finite, at least 0; "
            "0 does not wait)" % (who, wait)
        )
    return float(wait)


def wait_duration(seconds: float) -> Optional[str]:
    """The wait as the Go duration the sidecar reads ("3600s", "1.5s"),
    to the millisecond; None when it rounds to no wait."""
    text = ("%.3f" % seconds).rstrip("0").rstrip(".")
    return None if text == "0" else text + "s"


def encode_request(
    tool_name: Any,
    session_id: Any,
    agent_id: Any,
    metadata: Any,
    framework: Any,
    extra: Any,
    wait: float = 0.0,
    approval: Any = None,
    output: Any = None,
) -> bytes:
    """The request body; raises TypeError or ValueError for a caller's
    mistake, before anything is sent. ``output`` (built by build_output)
    makes it a result's."""
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
                "toolgate: evaluate() metadata must be a toolgate.EvaluationMetadata, not %s" % type(metadata).__name__
            )
        if metadata.input is not None:
            req["input"] = metadata.input
        if metadata.args is not None:
            req["args"] = metadata.args
        if metadata.kwargs is not None:
            req["kwargs"] = metadata.kwargs
        _set_str(req, "tool_use_id", metadata.tool_use_id)
    # Not fields of the call: the sidecar takes them out before deciding.
    if wait:
        d = wait_duration(wait)
        if d is not None:
            req["wait"] = d
    if approval is not None:
        if type(approval) is not str or not approval:
            raise TypeError("toolgate: evaluate() approval must name an ApprovalRequest (a non-empty str), not %r" % (approval,))
        req["approval"] = approval
    if output is not None:
        req["output"] = output
    try:
        return _encode(req).encode()
    except (TypeError, ValueError, RecursionError) as e:
        cls = TypeError if isinstance(e, TypeError) else ValueError
        raise cls("toolgate: the request to evaluate %r does not encode as JSON: %s" % (tool_name, e)) from e


def encodes(value: Any) -> bool:
    """Whether value is something a request can carry."""
    try:
        _encode(value)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def _set_str(req: Dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        return
    if type(value) is not str:
        raise TypeError("toolgate: evaluate() %s must be a str or None, not %s" % (key, type(value).__name__))
    if value:
        req[key] = value


def traceparent(trace: Trace) -> Optional[str]:
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
        logger.warning("toolgate: traceparent %r is not a W3C traceparent; not sent", clip(tp))
        return None
    return tp


_missing = object()


def read_answer(buf: bytes) -> Reading:
    """Parses one HTTP/1.x answer whose first bytes are buf, yielding for
    more; returns its status, its body (framed by Content-Length, chunked,
    or the end of the connection) and whether the connection must close
    after it."""
    if not buf:
        raise http.client.RemoteDisconnected("the connection closed without an answer")
    while True:
        i = buf.find(b"\r\n\r\n")
        if i >= 0:
            break
        if len(buf) > MAX_HEAD:
            raise http.client.HTTPException("an answer head over %d bytes" % MAX_HEAD)
        more = yield RECV
        if not more:
            raise http.client.IncompleteRead(buf)
        buf += more
    lines = buf[:i].decode("latin-1").split("\r\n")
    rest = buf[i + 4:]
    version, _, code = lines[0].partition(" ")
    code = code[:3]
    if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise http.client.BadStatusLine(clip(lines[0]))
    status = int(code)
    length = -1
    chunked = False
    close = version == "HTTP/1.0"
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise http.client.HTTPException("a malformed answer header %r" % clip(line))
        name = name.strip().lower()
        if name == "content-length":
            value = value.strip()
            if not value.isdigit():
                raise http.client.HTTPException("Content-Length %r" % clip(value))
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
        data, extra = yield from _read_chunked(rest)
        # Bytes past the answer would be read as the next one's start.
        close = close or extra
    elif length >= 0:
        if length > MAX_ANSWER:
            raise http.client.HTTPException("status %d, an answer of %d bytes" % (status, length))
        data = rest
        while len(data) < length:
            more = yield max(length - len(data), RECV)
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
            more = yield RECV
            if not more:
                break
            data += more
            if len(data) > MAX_ANSWER:
                raise http.client.HTTPException("status %d, an answer over %d bytes" % (status, MAX_ANSWER))
        close = True
    return status, data, close


def _read_chunked(buf: bytes) -> Generator[int, bytes, Tuple[bytes, bool]]:
    """The body of a chunked answer, and whether bytes came after it."""
    out = b""
    while True:
        while b"\r\n" not in buf:
            more = yield RECV
            if not more:
                raise http.client.IncompleteRead(out)
            buf += more
        line, _, buf = buf.partition(b"\r\n")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise http.client.HTTPException("a malformed chunk size %r" % clip(repr(line))) from None
        if size == 0:
            # Trailers, up to the empty line.
            while not (buf.startswith(b"\r\n") or b"\r\n\r\n" in buf):
                more = yield RECV
                if not more:
                    raise http.client.IncompleteRead(out)
                buf += more
            end = 2 if buf.startswith(b"\r\n") else buf.index(b"\r\n\r\n") + 4
            return out, len(buf) > end
        if len(out) + size > MAX_ANSWER:
            raise http.client.HTTPException("an answer over %d bytes" % MAX_ANSWER)
        while len(buf) < size + 2:
            more = yield RECV
            if not more:
                raise http.client.IncompleteRead(out)
            buf += more
        out += buf[:size]
        buf = buf[size + 2:]


def answer_json(status: int, data: bytes) -> Any:
    """The decoded body of a 200 answer; raises NoAnswer saying why there
    is none."""
    if status != 200:
        # The sidecar's 400 names what is wrong in {"error": ...}.
        try:
            err = _decode(data.decode())
        except ValueError:
            err = None
        if type(err) is dict and type(err.get("error")) is str and err["error"]:
            raise NoAnswer("status %d: %s" % (status, clip(err["error"])))
        raise NoAnswer("status %d" % status)
    try:
        return _decode(data.decode())
    except ValueError as e:  # UnicodeDecodeError is one
        raise NoAnswer("the answer is not JSON: %s: %s" % (e, clip(repr(data)))) from None


def describe(e: BaseException) -> str:
    s = str(e)
    return type(e).__name__ + (": " + s if s else "")


def clip(s: str, n: int = 200) -> str:
    return s if len(s) <= n else s[:n] + "..."
