"""The asyncio client: the same requests, answers and failures as Client,
over asyncio streams, so an event loop never waits on the sidecar."""

from __future__ import annotations

import asyncio
import http.client
import ssl
import time
from typing import Any, AsyncGenerator, List, Mapping, Optional, Tuple

from ._base import ClientBase
from ._output import build_output
from ._result import EvaluationMetadata, EvaluationResult
from ._wire import DEFAULT_TIMEOUT, DROPPED, RECV, NoAnswer, Trace, answer_json, check_wait, describe, read_answer

# Idle connections kept for reuse; more calls at once open more, and those
# past this many are closed when done.
_MAX_IDLE = 16

# Every connection is closed by aborting its transport, never by
# StreamWriter.close(): over TLS that sends close_notify and keeps the
# socket open until the peer answers it (up to 30 s), past the end of an
# asyncio.run that ends first, which leaves the socket to the garbage
# collector. What close() would still send is of no use: a connection is
# closed when it is idle, or when what is on it cannot be read as an answer.

_Conn = Tuple[asyncio.StreamReader, asyncio.StreamWriter]


class AsyncClient(ClientBase):
    """Asks a toolgate sidecar whether tool calls may run, from asyncio.

    Takes what Client takes (``url``, ``timeout``, ``fail_open``,
    ``session_id``), finds the sidecar the same way and returns the same
    EvaluationResult; ``await client.evaluate(...)`` has Client.evaluate's
    parameters. Standard library only (asyncio streams over the Unix socket,
    TCP or TLS).

    Calls running at once each use a connection of their own, kept alive
    for the next ones (up to 16 idle). ``timeout`` bounds each call, a
    reconnect included. Fail closed as Client: a sidecar that gives no
    decision is a deny with code ``SIDECAR_UNAVAILABLE``, never an
    exception; ``fail_open=True`` allows instead and counts it. A cancelled
    call closes its connection and raises CancelledError as usual.
    """

    def __init__(
        self,
        url: Optional[str] = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        fail_open: bool = False,
        session_id: Optional[str] = None,
    ) -> None:
        super().__init__(url, timeout, fail_open, session_id, "AsyncClient")
        # Idle connections and the loop they belong to: streams work only
        # on the loop that made them (asyncio.run makes a new one each time).
        self._idle: List[_Conn] = []
        self._idle_loop: Optional[asyncio.AbstractEventLoop] = None
        # The async generator that closes the idle connections when their
        # loop shuts down (see _watch).
        self._watcher: Optional[AsyncGenerator[None, None]] = None

    async def close(self) -> None:
        """Closes the idle connections; a later evaluate() opens new ones.
        The event loop's end closes them too (asyncio.run's, or
        loop.shutdown_asyncgens()), so a client used by one asyncio.run
        after another leaves no connection open."""
        idle, self._idle = self._idle, []
        if self._idle_loop is not asyncio.get_running_loop():
            for _, w in idle:
                _abort(w, self._idle_loop)
            return
        await _close_all(idle)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def evaluate(
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
        """Asks the sidecar whether ``tool_name`` may run: Client.evaluate,
        awaited (``wait`` and ``approval`` included)."""
        w = check_wait(wait, "evaluate()")
        msg = self._message(tool_name, session_id, agent_id, metadata, framework, trace, extra, w, approval)
        try:
            answer = await self._post(msg, self._timeout + w)
        except NoAnswer as e:
            return self._settle(tool_name, None, e)
        return self._settle(tool_name, answer, None)

    async def evaluate_result(
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
        """Asks the sidecar to judge what ``tool_name`` returned:
        Client.evaluate_result, awaited."""
        out = build_output(output, is_error)
        msg = self._message(tool_name, session_id, agent_id, metadata, framework, trace, extra, output=out)
        try:
            answer = await self._post(msg, self._timeout)
        except NoAnswer as e:
            return self._settle(tool_name, None, e)
        return self._settle(tool_name, answer, None)

    async def _adopt(self, loop: asyncio.AbstractEventLoop) -> None:
        """Makes loop, running now, the one whose connections are kept.
        Connections of another loop cannot be used here (its end closed
        them, unless it was closed without shutting down its async
        generators, or still runs in another thread)."""
        for _, w in self._idle:
            _abort(w, self._idle_loop)
        self._idle, self._idle_loop = [], loop
        await self._watch(loop)

    def _take_idle(self) -> Optional[_Conn]:
        while self._idle:
            r, w = self._idle.pop()
            if not r.at_eof() and not w.is_closing():
                return r, w
            w.transport.abort()
        return None

    async def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Closes the idle connections when loop shuts down. Once
        asyncio.run returns, its loop is closed and a transport of it can
        no longer be closed (closing needs the loop), so each would keep
        its socket open until the garbage collector finds it, a
        ResourceWarning. The loop's one hook before it closes is
        shutdown_asyncgens() (asyncio.run calls it, after cancelling every
        task): it closes every async generator started on it and not
        finished, and this one's finally then closes the connections, on
        the loop. A loop closed without it leaves them to the collector,
        as before."""
        watcher = _until_shutdown(self, loop)
        await watcher.__anext__()
        # The loop holds its async generators weakly: the client keeps it.
        self._watcher = watcher

    def _put_idle(self, conn: _Conn) -> None:
        if len(self._idle) < _MAX_IDLE and self._idle_loop is asyncio.get_running_loop():
            self._idle.append(conn)
        else:
            conn[1].transport.abort()

    async def _connect(self) -> _Conn:
        ep = self._endpoint
        if ep.scheme == "unix":
            return await asyncio.open_unix_connection(ep.socket)
        if ep.scheme == "https":
            return await asyncio.open_connection(ep.host, ep.port or 443, ssl=ssl.create_default_context())
        return await asyncio.open_connection(ep.host, ep.port or 80)

    async def _post(self, msg: bytes, budget: float) -> Any:
        """Sends one request and returns the decoded 200 answer within
        budget seconds (the timeout, plus any wait for a person); raises
        NoAnswer saying why there is none."""
        deadline = time.monotonic() + budget
        if self._idle_loop is not asyncio.get_running_loop():
            await self._adopt(asyncio.get_running_loop())
        conn = self._take_idle()
        reused = conn is not None
        while True:
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise asyncio.TimeoutError()
                status, data, conn = await _within(left, self._exchange(conn, msg))
                break
            except asyncio.TimeoutError:
                # Never retried: the budget is spent (wait_for closed the
                # connection the exchange had, see _exchange).
                raise NoAnswer("no answer within %gs" % budget) from None
            except DROPPED as e:
                if not reused or deadline - time.monotonic() <= 0:
                    raise NoAnswer(describe(e)) from None
                # The kept-alive connection was closed while idle: one new
                # connection, within what is left of the budget.
                reused, conn = False, None
            except (OSError, http.client.HTTPException, ValueError) as e:
                raise NoAnswer(describe(e)) from None
            except Exception as e:  # noqa: BLE001 - whatever went wrong, the answer is no decision
                raise NoAnswer("unexpected " + describe(e)) from None
        if conn is not None:
            self._put_idle(conn)
        return answer_json(status, data)

    async def _exchange(self, conn: Optional[_Conn], msg: bytes) -> Tuple[int, bytes, Optional[_Conn]]:
        """Writes one request and reads one answer through the shared
        parser (read_answer) on conn, or a new connection when None; returns
        the connection to keep, None when the answer closed it. Whatever
        ends the exchange early (an error, the timeout, a cancel) closes the
        connection: what is left on it cannot be read as the next answer."""
        if conn is None:
            conn = await self._connect()
        r, w = conn
        done = False
        try:
            w.write(msg)
            await w.drain()
            reading = read_answer(await r.read(RECV))
            try:
                n = next(reading)
                while True:
                    n = reading.send(await r.read(n))
            except StopIteration as end:
                status, data, close = end.value
            done = True
        finally:
            if not done:
                w.transport.abort()
        if close:
            w.transport.abort()
            return status, data, None
        return status, data, conn


async def _until_shutdown(client: AsyncClient, loop: asyncio.AbstractEventLoop) -> AsyncGenerator[None, None]:
    """Waits, suspended, for loop's end (AsyncClient._watch), then closes
    client's idle connections if they are still loop's."""
    try:
        yield
    finally:
        if client._idle_loop is loop:
            idle, client._idle = client._idle, []
            await _close_all(idle)


async def _close_all(conns: List[_Conn]) -> None:
    """Closes conns (of the running loop) and waits until they are."""
    for _, w in conns:
        w.transport.abort()
    for _, w in conns:
        try:
            await w.wait_closed()
        except Exception:  # noqa: BLE001 - closing: how it ended does not matter
            pass


def _abort(w: asyncio.StreamWriter, loop: Optional[asyncio.AbstractEventLoop]) -> None:
    """Closes a connection of loop, not the running one: on its own thread
    when loop runs there (transports are not thread-safe), here when it
    does not run; a closed loop's cannot be closed at all."""
    try:
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(w.transport.abort)
        else:
            w.transport.abort()
    except RuntimeError:  # the loop is closed
        pass


async def _within(seconds: float, aw: Any) -> Any:
    """aw, cancelled past seconds (asyncio.TimeoutError). asyncio.timeout
    (3.11+) bounds it in the calling task; wait_for, before it, runs it in
    a task of its own, which costs about a third of a call."""
    if _timeout is not None:
        async with _timeout(seconds):
            return await aw
    return await asyncio.wait_for(aw, seconds)


_timeout = getattr(asyncio, "timeout", None)

__all__ = ["AsyncClient"]
