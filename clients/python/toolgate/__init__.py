"""toolgate: ask the toolgate sidecar whether an agent's tool call may run.

    import toolgate

    client = toolgate.Client()              # TOOLGATE_URL, else the socket, else 127.0.0.1:8181
    res = client.evaluate("Bash", session_id="s-1",
                          metadata=toolgate.EvaluationMetadata(input={"command": "rm -rf /"}))
    if res.decision == "deny":
        raise PermissionError(res.reason)

    @toolgate.guard(client, session_id="s-1", framework="python")
    def pay(amount, currency="EUR"): ...

Standard library only. Fails closed: a sidecar that gives no decision is a
deny with code SIDECAR_UNAVAILABLE, never an exception.
"""

from ._client import DEFAULT_TIMEOUT, Client
from ._discover import DEFAULT_SOCKET, DEFAULT_URL, ENV_URL
from ._guard import ToolDenied, guard
from ._result import SIDECAR_UNAVAILABLE, EvaluationMetadata, EvaluationResult

__all__ = [
    "Client",
    "EvaluationMetadata",
    "EvaluationResult",
    "ToolDenied",
    "guard",
    "SIDECAR_UNAVAILABLE",
    "DEFAULT_TIMEOUT",
    "DEFAULT_SOCKET",
    "DEFAULT_URL",
    "ENV_URL",
]
__version__ = "0.1.0"
