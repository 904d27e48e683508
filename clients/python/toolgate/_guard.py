"""toolgate.guard: one line to guard a plain Python tool function."""

from __future__ import annotations

import asyncio
import functools
import inspect
from typing import Any, Callable, Dict, List, Optional, TypeVar, Union

from ._async import AsyncClient
from ._client import Client
from ._result import EvaluationMetadata, EvaluationResult
from ._output import delivered
from ._wire import check_wait, encodes

F = TypeVar("F", bound=Callable[..., Any])

#: How long a guarded call waits, by default, for a person to approve a
#: call an ask rule decided: the longest approval timeout a rule may set
#: (one hour), so the sidecar's cap, the rule's own timeout, decides.
GUARD_WAIT = 3600.0


class ToolDenied(PermissionError):
    """A guarded tool was not allowed (denied, or asked and not approved);
    ``result`` is the decision and ``tool_name`` the tool. The message
    names the code and the reason, so a model reading it can change
    course."""

    def __init__(self, tool_name: str, result: EvaluationResult, *, of_result: bool = False) -> None:
        self.tool_name = tool_name
        self.result = result
        #: True when what the tool returned was withheld (it ran; a result
        #: rule denied its output), False when the call was not allowed.
        self.of_result = of_result
        why = ": ".join(x for x in (result.code, result.reason) if x) or "denied"
        what = "withheld the result of" if of_result else "denied"
        super().__init__("toolgate %s %s: %s" % (what, tool_name, why))


def guard(
    client: Union[Client, AsyncClient],
    *,
    session_id: Optional[str] = None,
    framework: Optional[str] = None,
    agent_id: Optional[str] = None,
    tool_name: Optional[str] = None,
    wait: Optional[float] = GUARD_WAIT,
    judge_result: bool = True,
) -> Callable[[F], F]:
    """Decorates a tool function so every call is decided first.

    The tool is ``tool_name`` (default: the function's ``__name__``). Its
    arguments are bound to its parameters by name (``inspect.signature``)
    and sent as ``kwargs``, so a rule on ``kwargs.amount`` reads
    ``pay(5000)`` and ``pay(amount=5000)`` alike; a parameter left out is
    sent with its default, the value the function will run with (a default
    that does not encode as JSON, such as a sentinel object, is left out:
    it reads as absent). Only what has no name goes to ``args``: the values
    a ``*args`` parameter collects; a ``**kwargs`` parameter's keys join
    ``kwargs``. Arguments the function would refuse (a missing or unknown
    one) raise its TypeError before anything is sent.

    On an allow the function runs; on a deny it does not and ``ToolDenied``
    (a ``PermissionError``) is raised carrying the result. A call an ask
    rule waits for a person's approval, up to ``wait`` seconds (default an
    hour: the sidecar caps it at the rule's approval timeout), then runs
    if approved; not approved (denied, timed out, or still asked after the
    wait) it raises ``ToolDenied`` with the reason. Only an asked call
    waits: each call is first decided within the client's timeout, and
    only an ask is sent again with its approval and the wait, so a hung
    sidecar still fails closed at the timeout. ``wait=0`` (or None) does
    not wait: an ask raises at once. ``session_id``
    defaults to the client's. Coroutine functions are guarded too: with an
    AsyncClient the decision is awaited; with a Client the blocking
    evaluate() runs in a worker thread (``asyncio.to_thread``), so the event
    loop never waits on the sidecar. An AsyncClient guards only coroutine
    functions. Arguments that do not encode as JSON raise TypeError, as
    evaluate() does, and the function does not run. On a method (a function
    whose first parameter is named ``self`` or ``cls``) the instance or
    class is not an argument of the tool and is not sent.

    After the tool ran, what it returned is judged with the result rules
    (``evaluate_result``; ``judge_result=False`` skips it): withheld, it
    raises ``ToolDenied`` with ``of_result`` set and the reason, and the
    return value is dropped; redacted, the guarded function returns the
    redacted output (a str, or for a dict or list the redacted JSON read
    back, else its redacted text), never the original.

        @toolgate.guard(client, framework="python")
        def pay(amount, currency="EUR"): ...
    """
    if not isinstance(client, (Client, AsyncClient)):
        raise TypeError(
            "toolgate.guard: client must be a toolgate.Client or AsyncClient, not %s" % type(client).__name__
        )
    wait = check_wait(wait, "toolgate.guard(...)")

    def asked(res: EvaluationResult) -> bool:
        # An ask names its ApprovalRequest: the same call, sent again with
        # it and the wait, is held until a person decides it.
        return bool(wait) and res.asked and res.approval is not None

    def decorate(fn: F) -> F:
        name = tool_name or getattr(fn, "__name__", None)
        if not name:
            raise ValueError("toolgate.guard: %r has no __name__: pass tool_name=" % (fn,))
        is_async = inspect.iscoroutinefunction(fn)
        if isinstance(client, AsyncClient) and not is_async:
            raise TypeError(
                "toolgate.guard: %s is not a coroutine function: an AsyncClient guards async def tools; "
                "use a toolgate.Client for it" % name
            )
        binder = _Binder(fn)

        def request(args: Any, kwargs: Any) -> Dict[str, Any]:
            return dict(session_id=session_id, agent_id=agent_id, framework=framework,
                        metadata=binder.metadata(args, kwargs))

        def check(args: Any, kwargs: Any) -> Dict[str, Any]:
            req = request(args, kwargs)
            res = client.evaluate(name, **req)
            if asked(res):
                res = client.evaluate(name, **req, wait=wait, approval=res.approval.name)
            if not res.allowed:
                raise ToolDenied(name, res)
            return req

        def judged(req: Dict[str, Any], value: Any) -> Any:
            res = client.evaluate_result(name, value, **req)
            return _deliver(name, res, value)

        if is_async:
            if isinstance(client, AsyncClient):

                @functools.wraps(fn)
                async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                    req = request(args, kwargs)
                    res = await client.evaluate(name, **req)
                    if asked(res):
                        res = await client.evaluate(name, **req, wait=wait, approval=res.approval.name)
                    if not res.allowed:
                        raise ToolDenied(name, res)
                    value = await fn(*args, **kwargs)
                    if not judge_result:
                        return value
                    return _deliver(name, await client.evaluate_result(name, value, **req), value)

            else:

                @functools.wraps(fn)
                async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                    req = await asyncio.to_thread(check, args, kwargs)
                    value = await fn(*args, **kwargs)
                    if not judge_result:
                        return value
                    return await asyncio.to_thread(judged, req, value)

            return guarded_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            req = check(args, kwargs)
            value = fn(*args, **kwargs)
            return judged(req, value) if judge_result else value

        return guarded  # type: ignore[return-value]

    return decorate


def _deliver(name: str, res: EvaluationResult, value: Any) -> Any:
    """What a guarded tool returns once its result is judged: value as it
    is, the redacted output, or ToolDenied. A redact decision without the
    redacted text cannot be delivered: withheld, fail closed."""
    if not res.allowed:
        raise ToolDenied(name, res, of_result=True)
    if not res.redacted:
        return value
    text = res.redacted_text
    if text is None:
        raise ToolDenied(name, EvaluationResult("deny", "the sidecar redacted the result but sent no output to deliver; withheld (fail closed)",
                                                res.code, res.matched_policy_id, res.matched_policy_version, res.matched_rule_id,
                                                effect="deny"), of_result=True)
    return delivered(value, text)


class _Binder:
    """How a call of fn is sent: every value bound to a named parameter in
    kwargs (defaults included), *args in args (left out when empty),
    **kwargs' keys in kwargs."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.sig = inspect.signature(fn)
        params = list(self.sig.parameters.values())
        # A method's instance or class is not an argument of the tool.
        self.skip = params[0].name if params and params[0].name in ("self", "cls") else None
        self.kinds = {p.name: p.kind for p in params}
        self.defaults = {
            p.name: p.default
            for p in params
            if p.default is not inspect.Parameter.empty and p.name != self.skip and encodes(p.default)
        }

    def metadata(self, args: Any, kwargs: Any) -> EvaluationMetadata:
        # Raises the TypeError calling fn would: the tool never runs then.
        bound = self.sig.bind(*args, **kwargs).arguments
        named: Dict[str, Any] = {}
        rest: List[Any] = []
        extra: Dict[str, Any] = {}
        for pname, kind in self.kinds.items():
            if pname == self.skip:
                continue
            if kind is inspect.Parameter.VAR_POSITIONAL:
                rest.extend(bound.get(pname, ()))
            elif kind is inspect.Parameter.VAR_KEYWORD:
                extra.update(bound.get(pname, {}))
            elif pname in bound:
                named[pname] = bound[pname]
            elif pname in self.defaults:
                named[pname] = self.defaults[pname]
        for key in extra:
            if key in named:
                # def f(amount, /, **kw) takes f(1, amount=5000): a policy
                # reading kwargs.amount could see only one of the two.
                raise TypeError(
                    "toolgate.guard: %r is both a positional-only parameter and a keyword argument of this call; "
                    "the policy could not tell them apart" % key
                )
        named.update(extra)
        return EvaluationMetadata(args=rest or None, kwargs=named)
