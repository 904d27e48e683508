"""toolgate.guard: one line to guard a plain Python tool function."""

from __future__ import annotations

import asyncio
import functools
import inspect
from typing import Any, Callable, Optional, TypeVar

from ._client import Client
from ._result import EvaluationMetadata, EvaluationResult

F = TypeVar("F", bound=Callable[..., Any])


class ToolDenied(PermissionError):
    """A guarded tool was denied; ``result`` is the decision and
    ``tool_name`` the tool. The message names the code and the reason, so a
    model reading it can change course."""

    def __init__(self, tool_name: str, result: EvaluationResult) -> None:
        self.tool_name = tool_name
        self.result = result
        why = ": ".join(x for x in (result.code, result.reason) if x) or "denied"
        super().__init__("toolgate denied %s: %s" % (tool_name, why))


def guard(
    client: Client,
    *,
    session_id: str,
    framework: Optional[str] = None,
    agent_id: Optional[str] = None,
    tool_name: Optional[str] = None,
) -> Callable[[F], F]:
    """Decorates a tool function so every call is decided first.

    The tool is ``tool_name`` (default: the function's ``__name__``); its
    positional arguments are sent as ``args`` and its keyword arguments as
    ``kwargs``. On an allow the function runs; on a deny it does not and
    ``ToolDenied`` (a ``PermissionError``) is raised carrying the result.
    Coroutine functions are guarded too: the blocking evaluate() runs in a
    worker thread (``asyncio.to_thread``), so the event loop never waits on
    the sidecar. Arguments that do not encode as JSON raise TypeError, as
    evaluate() does, and the function does not run. On a method (a function
    whose first parameter is named ``self`` or ``cls``) the instance or
    class is not an argument of the tool and is not sent.

        @toolgate.guard(client, session_id="s-1", framework="python")
        def pay(amount, currency="EUR"): ...
    """
    if not isinstance(client, Client):
        raise TypeError("toolgate.guard: client must be a toolgate.Client, not %s" % type(client).__name__)

    def decorate(fn: F) -> F:
        name = tool_name or getattr(fn, "__name__", None)
        if not name:
            raise ValueError("toolgate.guard: %r has no __name__: pass tool_name=" % (fn,))

        params = list(inspect.signature(fn).parameters)
        bound = 1 if params and params[0] in ("self", "cls") else 0

        def check(args: Any, kwargs: Any) -> None:
            args = args[bound:]
            res = client.evaluate(
                name,
                session_id=session_id,
                agent_id=agent_id,
                framework=framework,
                metadata=EvaluationMetadata(args=list(args), kwargs=dict(kwargs)),
            )
            if res.decision != "allow":
                raise ToolDenied(name, res)

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                await asyncio.to_thread(check, args, kwargs)
                return await fn(*args, **kwargs)

            return guarded_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            check(args, kwargs)
            return fn(*args, **kwargs)

        return guarded  # type: ignore[return-value]

    return decorate
