"""toolgate: ask the toolgate sidecar whether an agent's tool call may run.

    import toolgate

    client = toolgate.Client()              # TOOLGATE_URL, else the socket, else 127.0.0.1:8181
    res = client.evaluate("Bash", metadata=toolgate.EvaluationMetadata(input={"command": "rm -rf /"}))
    if not res.allowed:                     # a deny, or an ask no one approved yet
        raise PermissionError(res.reason)   # res.code, res.matched_rule_id: the rule's id
    client.evaluate("pay", ..., wait=300)   # an ask rule's call: wait up to 5 min for a person

    @toolgate.guard(client, framework="python")
    def pay(amount, currency="EUR"): ...    # pay(5000) is sent as kwargs {"amount": 5000, "currency": "EUR"}

    res = await toolgate.AsyncClient().evaluate("Bash", ...)   # the same, from asyncio

    res = client.evaluate_result("read_file", text)   # what the tool returned, judged by result rules
    if not res.allowed: ...                 # withheld: do not hand it to the model
    if res.redacted: text = res.redacted_text         # spans replaced by [REDACTED:<rule-id>]

Standard library only. Fails closed: a sidecar that gives no decision is a
deny with code SIDECAR_UNAVAILABLE, never an exception.
"""

from ._async import AsyncClient
from ._client import DEFAULT_TIMEOUT, Client
from ._discover import DEFAULT_SOCKET, DEFAULT_URL, ENV_URL
from ._guard import ToolDenied, guard
from ._output import build_output
from ._result import SIDECAR_UNAVAILABLE, Approval, EvaluationMetadata, EvaluationResult

__all__ = [
    "Approval",
    "AsyncClient",
    "Client",
    "EvaluationMetadata",
    "EvaluationResult",
    "ToolDenied",
    "build_output",
    "guard",
    "SIDECAR_UNAVAILABLE",
    "DEFAULT_TIMEOUT",
    "DEFAULT_SOCKET",
    "DEFAULT_URL",
    "ENV_URL",
]
__version__ = "0.1.0"
