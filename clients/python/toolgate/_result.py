"""What evaluate() takes (the call's arguments) and returns (a decision)."""

from __future__ import annotations

import warnings as _warnings
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

#: The code of a result the client made itself because the sidecar gave no
#: decision: unreachable, past the timeout, a non-200 status, or an answer
#: that is not a decision. It comes with a deny, or with an allow when the
#: client was made with fail_open=True.
SIDECAR_UNAVAILABLE = "SIDECAR_UNAVAILABLE"


@dataclass
class EvaluationMetadata:
    """A tool call's arguments, in the field matching how the tool takes
    them: ``input`` (MCP, Claude Agent: the dict the tool was invoked with),
    ``args``/``kwargs`` (LangChain, plain functions: positional and keyword),
    and the framework's id of the call. Policies read them as
    ``input.<key>``, ``args.<index>`` and ``kwargs.<key>``."""

    input: Optional[Dict[str, Any]] = None
    args: Optional[List[Any]] = None
    kwargs: Optional[Dict[str, Any]] = None
    tool_use_id: Optional[str] = None


def _deprecated_alias(camel: str, snake: str) -> property:
    """A camelCase attribute of earlier versions, read from its snake_case
    successor with a DeprecationWarning."""

    def get(self: "EvaluationResult") -> Any:
        _warnings.warn(
            "toolgate: EvaluationResult.%s is deprecated, use .%s" % (camel, snake), DeprecationWarning, stacklevel=2
        )
        return getattr(self, snake)

    get.__doc__ = "Deprecated: %s." % snake
    return property(get)


@dataclass(frozen=True)
class Approval:
    """The ApprovalRequest an asked call waits on: its ``name`` and
    ``namespace`` on Kubernetes, and ``expires_at`` (RFC 3339, UTC), after
    which it can no longer be approved."""

    name: str
    namespace: str
    expires_at: str


@dataclass
class EvaluationResult:
    """A decision. The attributes are the snake_case forms of the sidecar's
    JSON names (``matchedRuleId`` on the wire is ``matched_rule_id``); the
    camelCase attributes of earlier versions still read, with a
    DeprecationWarning.

    For a deny by a rule, ``code`` is the rule's id and ``reason`` its
    description; otherwise ``code`` is the sidecar's own (``AGENT_FROZEN``,
    ``NO_POLICIES``, ``OVERLOADED``, ``USAGE_UNAVAILABLE``, ...: every one
    in docs/policies.md, "The result"), the client's ``SIDECAR_UNAVAILABLE``,
    or None.
    ``decision`` is what to do: "allow", "deny", or "ask" (an ask rule
    decided and no one has approved yet: not allowed; ``approval`` names
    the ApprovalRequest, and ``evaluate(..., approval=name)`` decides the
    same call against it); ``effect`` is what the deciding rule said
    ("allow", "deny", "ask", "warn" or "audit": warn and audit allow).
    Run the tool only when ``allowed``."""

    decision: str
    reason: Optional[str] = None
    code: Optional[str] = None
    matched_policy_id: Optional[str] = None
    matched_policy_version: Optional[int] = None
    matched_rule_id: Optional[str] = None
    latency_ms: float = 0.0
    effect: Optional[str] = None
    warnings: Optional[List[str]] = None
    bundle_revision: Optional[str] = None
    decision_id: Optional[str] = None
    #: "ClusterPolicy" or "Policy": the level that decided, in a namespace
    #: that ClusterPolicies select (docs/guardrails.md); None otherwise.
    matched_policy_kind: Optional[str] = None
    #: The PolicyException that changed this decision (docs/exceptions.md).
    exception_applied: Optional[str] = None
    #: What each Audit (shadow mode) policy would have decided, as dicts
    #: {"kind"?, "policy", "decision", "rule"?}; it never changes the decision.
    shadow: Optional[List[Dict[str, Any]]] = None
    #: The ApprovalRequest of an asked call: on an ask, and on the allow
    #: or deny its approval settled into; None otherwise.
    approval: Optional[Approval] = None
    #: A result's decision (evaluate_result): the spans of output.text a
    #: redact decision replaced, as dicts {start, end, policyId, ruleId}
    #: (byte offsets into the UTF-8 text).
    redactions: Optional[List[Dict[str, Any]]] = None
    #: A redact decision's output as it must be delivered: the output sent,
    #: its "text" with every redacted span replaced by
    #: [REDACTED:<rule-id>]. None otherwise.
    output: Optional[Dict[str, Any]] = None
    #: A result's decision: per result rule that ran, a dict {policyId,
    #: ruleId, effect, passed, score, condition?, explanation?}.
    explanations: Optional[List[Dict[str, Any]]] = None

    @property
    def allowed(self) -> bool:
        """Whether the tool may run: only on an allow (never on an ask)."""
        return self.decision == "allow"

    @property
    def asked(self) -> bool:
        """Whether the call waits for a person's approval (``approval``)."""
        return self.decision == "ask"

    @property
    def redacted(self) -> bool:
        """Whether a result goes on with spans redacted: deliver
        ``redacted_text`` (``output["text"]``), never what the tool
        returned."""
        return self.decision == "allow" and self.effect == "redact"

    @property
    def redacted_text(self) -> Optional[str]:
        """The output's text as a redact decision delivers it; None when
        the decision carries no output."""
        text = (self.output or {}).get("text")
        return text if type(text) is str else None

    matchedPolicyId = _deprecated_alias("matchedPolicyId", "matched_policy_id")
    matchedPolicyVersion = _deprecated_alias("matchedPolicyVersion", "matched_policy_version")
    matchedRuleId = _deprecated_alias("matchedRuleId", "matched_rule_id")
    latencyMs = _deprecated_alias("latencyMs", "latency_ms")
    bundleRevision = _deprecated_alias("bundleRevision", "bundle_revision")
    decisionId = _deprecated_alias("decisionId", "decision_id")


def from_answer(d: Any) -> Optional[EvaluationResult]:
    """The sidecar's answer as a result, or None when it is not a decision
    (a proxy's {}, another service's JSON, {"decision": "maybe"}): a
    decision this client does not know is never read as one."""
    if type(d) is not dict:
        return None
    decision = d.get("decision")
    if decision not in ("allow", "deny", "ask"):
        return None
    g = d.get
    reason, code, rule = g("reason"), g("code"), g("matchedRuleId")
    policy, version, latency = g("matchedPolicyId"), g("matchedPolicyVersion"), g("latencyMs", 0.0)
    effect, warnings = g("effect") or decision, g("warnings")
    revision, decision_id = g("bundleRevision"), g("decisionId")
    kind, exception, shadow = g("matchedPolicyKind"), g("exceptionApplied"), g("shadow")
    if not (
        _opt_str(reason) and _opt_str(code) and _opt_str(rule) and _opt_str(policy)
        and _opt_str(effect) and _opt_str(revision) and _opt_str(decision_id)
        and (version is None or type(version) is int)
        and (type(latency) is float or type(latency) is int)
        and (warnings is None or (type(warnings) is list and all(type(w) is str for w in warnings)))
        and _opt_str(kind) and _opt_str(exception)
        and (shadow is None or (type(shadow) is list and all(type(v) is dict for v in shadow)))
    ):
        return None
    approval = _approval(g("approval"))
    if approval is False:
        return None
    redactions, output, explanations = g("redactions"), g("output"), g("explanations")
    if not (
        _opt_dicts(redactions) and _opt_dicts(explanations) and (output is None or type(output) is dict)
    ):
        return None
    if decision == "deny" and not code and rule:
        # A rule's deny is coded by the rule's id.
        code = rule
    return EvaluationResult(
        decision, reason, code or None, policy, version, rule, float(latency),
        effect, warnings, revision, decision_id, kind, exception, shadow, approval,
        redactions, output, explanations,
    )


def _approval(v: Any) -> Any:
    """The answer's approval, None when absent, False when malformed."""
    if v is None:
        return None
    if type(v) is not dict:
        return False
    name, namespace, expires = v.get("name"), v.get("namespace"), v.get("expiresAt")
    if not (type(name) is str and name and type(namespace) is str and type(expires) is str):
        return False
    return Approval(name, namespace, expires)


def _opt_str(v: Any) -> bool:
    return v is None or type(v) is str


def _opt_dicts(v: Any) -> bool:
    return v is None or (type(v) is list and all(type(x) is dict for x in v))


def unavailable(decision: str, reason: str) -> EvaluationResult:
    """The client's own result when the sidecar gave none."""
    return EvaluationResult(decision, reason, SIDECAR_UNAVAILABLE, effect=decision)
