# ---------------------------------------------------------------------------
# The scan: what toolgate's engine does with the rules above, in Rego.
# Policies are in evaluation order (priority descending, then name); their
# ids, versions, defaults and each rule's effect and reason are in
# data.toolgate.policies, which is only ever read a leaf at a time (OPA
# converts what it reads from its store on every read). The rules above add to:
#   deny_hit [policy, rule]               a deny rule of an ordered policy matched
#   hit    [policy, rule]                 another rule of an ordered policy matched (an ask too)
#   thit   [policy, rank, rule]           a tiered policy's rule matched at tool level
#   rhit   [policy, resource, rank, rule] ... or for one resource of the call
#   rbound [policy, resource]             a tiered policy has rules bound to that resource
#   shadow_hit [policy, rule]             a rule of an ordered Audit policy matched
# The enforcing policies come first (data.toolgate.policyCount of them, the
# clusterCount ClusterPolicies first), then the Audit ones (shadows).
# ---------------------------------------------------------------------------

# decision, what `toolgate eval` prints for input less latencyMs and trace
# (an ask adds approvalTimeoutSeconds), is written above it by the
# exporter: a frozen agent, else NO_POLICIES, else _scan (one level: no
# ClusterPolicy, exception or shadow policy) or _shadowed(_decided). Choosing there costs a bundle of one level nothing.

# The decision with the exceptions in force, naming the one that changed it
# (exceptionApplied): only when one exempts this call from a rule, as only
# then can the decision differ from the one without exceptions.
_decided := r if {
	count(_exempt) == 0
	r := _levels
} else := _applied(_levels, _levels_without)

_levels_without := r if {
	r := _levels with data.toolgate._exempt as set()
}

# One level (no ClusterPolicy) is scanned as bundles always were; two are
# decided each on its own, the most restrictive winning.
_levels := _scan if {
	not data.toolgate.clusterCount
} else := _two_levels

# The policies' indexes, in evaluation order.
_policies := numbers.range(0, data.toolgate.policyCount - 1) if {
	data.toolgate.policyCount > 0
} else := []

_rule(pi, ri) := data.toolgate.policies[pi].rules[ri]

# The clock: input.now (RFC 3339) when given, else OPA's.
_now_ns := t if {
	t := time.parse_rfc3339_ns(input.now)
} else := time.now_ns()

# A frozen agent_id (compared as strings.EqualFold does) denies everything
# until the freeze expires.
_frozen := _result("deny", "deny", null, null, null, null, "AGENT_FROZEN", live[0].reason, []) if {
	data.toolgate.frozenCount > 0
	entries := data.toolgate.frozenAgents[_agent_fold]
	live := [e | some e in entries; not _expired(e)]
	count(live) > 0
} else := _result("deny", "deny", null, null, null, null, "AGENT_FROZEN", live[0].reason, []) if {
	# A freeze of every agent (allAgents), after one naming the agent_id.
	live := [e | some e in data.toolgate.frozenAll; not _expired(e)]
	count(live) > 0
}

# A result evaluation (issue 28) is one whose input carries the tool's
# output: result rules decide it, call rules the others.
_result_phase if "output" in object.keys(input)

# A policy's defaultEffect denies a call no rule matched; a result no
# result rule judged goes on.
_default_denies(pi) if {
	data.toolgate.policies[pi].defaultDeny
	not _result_phase
}

_expired(e) if {
	e.expiresAtNs != null
	_now_ns >= e.expiresAtNs
}

_agent_fold := _fold(input.agent_id) if is_string(input.agent_id)

# Unicode simple folding: every rune to one fixed member of its orbit
# (data.toolgate.fold lists the runes that change; ASCII lower-cases).
_fold(s) := lower(s) if {
	regex.match(`^[\x00-\x7f]*$`, s)
} else := concat("", [_fold_rune(c) | some c in split(s, "")])

_fold_rune(c) := f if {
	f := data.toolgate.fold[c]
} else := c

# The result object, with the keys the engine leaves out left out (null
# matchedResource and code, an empty reason, no warnings).
_result(decision, effect, pid, pver, rid, res, code, reason, warnings) := object.remove(
	{
		"decision": decision, "effect": effect, "matchedPolicyId": pid, "matchedPolicyVersion": pver,
		"matchedRuleId": rid, "matchedResource": res, "code": _stated_code(decision, rid, code), "reason": reason, "warnings": warnings,
	},
	{k | some k, v in {"matchedResource": res, "code": _stated_code(decision, rid, code), "reason": reason, "warnings": warnings}; v in {null, "", []}},
)

# The code an answer states (the engine's Result.StatedCode): its own, else
# on a rule's deny the rule's id.
_stated_code(decision, rid, code) := rid if {
	code == null
	decision == "deny"
	rid != null
} else := code

# The scan stops at the first ordered deny, the first policy that does not
# compile, or the first tiered policy whose verdict is a deny: as
# [policy, rule], rule -1 for the policy itself (before any of its rules).
_stops contains h if some h in deny_hit

_stops contains [pi, -1] if some pi in data.toolgate.compileErrors

_stops contains [pi, -1] if {
	some pi in data.toolgate.tieredPolicies
	_tiered_verdict[pi].stop
}

_scan := r if {
	s := min(_stops)
	data.toolgate.policies[s[0]].compileError != ""
	p := data.toolgate.policies[s[0]]
	r := _result("deny", "deny", p.id, p.version, null, null, "POLICY_COMPILE_ERROR", p.compileError, _warnings_before(s))
} else := r if {
	s := min(_stops)
	s[1] >= 0
	r := _rule_result(s[0], s[1], _warnings_before(s))
} else := r if {
	s := min(_stops)
	r := _tiered_result(s[0], _warnings_before([s[0] + 1, -1]))
} else := r if {
	# Otherwise an ask decides (no later allow, warn or audit replaces it):
	# the first policy whose verdict asks.
	data.toolgate.asks
	r := _last_result(min(_asking), _warnings_before([data.toolgate.policyCount, -1]))
} else := r if {
	# Otherwise the last policy with a verdict: an ordered policy's last
	# match, or a tiered policy's verdict.
	pi := max({h[0] | some h in hit} | {pi | some pi in data.toolgate.tieredPolicies; _tiered_verdict[pi].set})
	r := _last_result(pi, _warnings_before([data.toolgate.policyCount, -1]))
} else := r if {
	_default_denies(0)
	r := _result("deny", "deny", null, null, null, null, null, data.toolgate.policies[0].defaultReason, _warnings_before([data.toolgate.policyCount, -1]))
} else := _result("allow", "allow", null, null, null, null, null, null, _warnings_before([data.toolgate.policyCount, -1]))

# The enforcing policies with a verdict (as _scan reads them).
_verdicts := {h[0] | some h in hit} | {pi | some pi in data.toolgate.tieredPolicies; _tiered_verdict[pi].set}

# The enforcing policies whose verdict asks: an ordered policy with a
# matching ask rule (one with a matching deny stops the scan first), a
# tiered policy whose verdict is an ask. Read only behind data.toolgate.asks
# (some rule asks), so a bundle without ask pays nothing for it.
_asking := {h[0] | some h in hit; _rule(h[0], h[1]).effect in _sticky} | {pi |
	some pi in data.toolgate.tieredPolicies
	_tiered_verdict[pi].effect in _sticky
}

# The effects that decide an ordered policy, and the scan, unless a deny
# does: ask, and a result rule's redact. data.toolgate.asks is set when
# some rule has one of them.
_sticky := {"ask", "redact"}

_default_deny(pi, warnings) := _result("deny", "deny", null, null, null, null, null, data.toolgate.policies[pi].defaultReason, warnings)

# Two levels, the cluster's scanned first: a stop (first deny) or default
# deny on the cluster level ends the decision; then one on the namespace's;
# otherwise the stronger verdict (deny > ask > warn > audit > allow), a tie
# to the namespace's, else allow. matchedPolicyKind names the deciding level.
_cluster_count := data.toolgate.clusterCount

_two_levels := r if {
	# A stop decides as in one level (_scan's first branches).
	min(_stops)[0] < _cluster_count
	r := _kinded(_scan, "ClusterPolicy")
} else := r if {
	not _cluster_verdict
	_default_denies(0)
	r := _kinded(_default_deny(0, _warnings_before([_cluster_count, -1])), "ClusterPolicy")
} else := r if {
	count(_stops) > 0
	r := _kinded(_scan, "Policy")
} else := r if {
	_has_namespace_level
	not _namespace_verdict
	_default_denies(_cluster_count)
	r := _kinded(_default_deny(_cluster_count, _all_warnings), "Policy")
} else := r if {
	c := _last_result(_cluster_verdict, _all_warnings)
	not _namespace_outranks(c)
	r := _kinded(c, "ClusterPolicy")
} else := r if {
	r := _kinded(_last_result(_namespace_verdict, _all_warnings), "Policy")
} else := r if {
	_has_namespace_level
	r := _kinded(_result("allow", "allow", null, null, null, null, null, null, _all_warnings), "Policy")
} else := _kinded(_result("allow", "allow", null, null, null, null, null, null, _all_warnings), "ClusterPolicy")

_has_namespace_level if data.toolgate.policyCount > _cluster_count

# Each level's verdict: its first policy whose verdict asks, else its last
# policy with one.
_cluster_verdict := pi if {
	data.toolgate.asks
	pi := min({pi | some pi in _asking; pi < _cluster_count})
} else := max({pi | some pi in _verdicts; pi < _cluster_count})

_namespace_verdict := pi if {
	data.toolgate.asks
	pi := min({pi | some pi in _asking; pi >= _cluster_count})
} else := max({pi | some pi in _verdicts; pi >= _cluster_count})

_namespace_outranks(c) if {
	n := _last_result(_namespace_verdict, _all_warnings)
	_effect_rank[n.effect] >= _effect_rank[c.effect]
}

_all_warnings := _warnings_before([data.toolgate.policyCount, -1])

_kinded(r, kind) := object.union(r, {"matchedPolicyKind": kind})

# A policy's verdict as the result: a tiered policy's, else an ordered
# policy's first matching ask, else its last match.
_last_result(pi, warnings) := _tiered_result(pi, warnings) if {
	data.toolgate.policies[pi].tiered
} else := _sticky_result(pi, ri, warnings) if {
	data.toolgate.asks
	pi in _asking
	ri := min({h[1] | some h in hit; h[0] == pi; _rule(pi, h[1]).effect in _sticky})
} else := _rule_result(pi, max({h[1] | some h in hit; h[0] == pi}), warnings)

_sticky_result(pi, ri, warnings) := _ask_result(pi, ri, warnings) if {
	_rule(pi, ri).effect == "ask"
} else := _rule_result(pi, ri, warnings)

# The result of a rule that does not ask (a stop's deny, an ordered
# policy's last match, which is never an ask: _last_result).
_rule_result(pi, ri, warnings) := r if {
	rule := data.toolgate.policies[pi].rules[ri]
	r := _result(
		_decision_of(rule.effect), rule.effect, data.toolgate.policies[pi].id, data.toolgate.policies[pi].version,
		rule.id, null, null, rule.reason, warnings,
	)
}

_ask_result(pi, ri, warnings) := r if {
	rule := data.toolgate.policies[pi].rules[ri]
	r := _approval(_result(
		"ask", "ask", data.toolgate.policies[pi].id, data.toolgate.policies[pi].version,
		rule.id, null, "APPROVAL_REQUIRED", rule.reason, warnings,
	), rule)
}

_tiered_result(pi, warnings) := r if {
	v := _tiered_verdict[pi]
	r0 := _result(
		_decision_of(v.effect), v.effect, data.toolgate.policies[pi].id, data.toolgate.policies[pi].version,
		_rule_id(pi, v), _resource_ref(v), _code(v), _reason(pi, v), warnings,
	)
	r := _tiered_approval(r0, pi, v)
}

# An ask states how long its call may wait for a person: the asking rule's
# approval.timeout in seconds (the engine's Result.ApprovalTimeout).
_approval(r, rule) := object.union(r, {"approvalTimeoutSeconds": rule.approvalTimeoutSeconds}) if {
	rule.effect == "ask"
} else := r

_tiered_approval(r, pi, v) := _approval(r, _rule(pi, v.rule)) if {
	v.rule != null
} else := r

# The warnings reached before [policy, rule]: every matching warn rule of an
# ordered policy, every warn verdict of a tiered one, in scan order.
_warnings_before(s) := [] if {
	not data.toolgate.warns
} else := [w |
	some pi in _policies
	[pi, -1] < s
	some w in _warnings_of(pi, s)
]

_warnings_of(pi, s) := _tiered_verdict[pi].warnings if {
	data.toolgate.policies[pi].tiered
} else := [_rule(pi, ri).reason |
	some ri in sort({h[1] | some h in hit; h[0] == pi})
	[pi, ri] < s
	_rule(pi, ri).effect == "warn"
]

_decision_of("deny") := "deny"

_decision_of("ask") := "ask"

_decision_of(e) := "allow" if {
	e != "deny"
	e != "ask"
}

# The code of a rule's verdict: APPROVAL_REQUIRED for every ask; a deny
# states its rule's id (_stated_code).
_effect_code("ask") := "APPROVAL_REQUIRED"

_effect_code(e) := null if e != "ask"

_rule_id(pi, v) := data.toolgate.policies[pi].rules[v.rule].id if v.rule != null

_rule_id(_, v) := null if v.rule == null

_resource_ref(v) := {"type": _resources[v.res].type, "name": _resources[v.res].name} if v.res != null

_resource_ref(v) := null if v.res == null

_code(v) := "IMPLICIT_DENY" if v.implicit

_code(v) := _effect_code(v.effect) if not v.implicit

_reason(pi, v) := data.toolgate.policies[pi].rules[v.rule].reason if v.rule != null

_reason(pi, v) := sprintf("no rule bound to resource %s/%s matched in policy %q", [_resources[v.res].type, _resources[v.res].name, data.toolgate.policies[pi].id]) if {
	v.implicit
}

# A tiered policy: one evaluation at tool level and one per resource the
# call touches, each decided by its top-ranked matching rule (priority,
# then deny > ask > warn > audit > allow, then spec order), or for a
# resource with rules bound to it of which none matched, an implicit deny. The strongest
# effect wins, ties to the earliest evaluation.
_tiered_verdict[pi] := v if {
	some pi in data.toolgate.tieredPolicies
	evals := array.concat([_tool_eval(pi)], [e | some i, _ in _resources; e := _resource_eval(pi, i)])
	v := _tiered(evals)
}

_tiered(evals) := v if {
	set := [e | some e in evals; e.set]
	count(set) > 0
	top := max({_effect_rank[e.effect] | some e in set})
	best := [e | some e in set; _effect_rank[e.effect] == top][0]
	v := object.union(best, {"stop": best.effect == "deny", "warnings": [e.reason | some e in set; e.effect == "warn"]})
} else := {"set": false, "stop": false, "warnings": []}

_effect_rank := {"deny": 5, "ask": 4, "redact": 3, "warn": 2, "audit": 1, "allow": 0}

_tool_eval(pi) := v if {
	ranked := {[h[1], h[2]] | some h in thit; h[0] == pi}
	count(ranked) > 0
	ri := min(ranked)[1]
	v := {"set": true, "effect": _rule(pi, ri).effect, "rule": ri, "res": null, "implicit": false, "reason": _rule(pi, ri).reason}
} else := {"set": false}

_resource_eval(pi, i) := v if {
	ranked := {[h[2], h[3]] | some h in rhit; h[0] == pi; h[1] == i}
	count(ranked) > 0
	ri := min(ranked)[1]
	v := {"set": true, "effect": _rule(pi, ri).effect, "rule": ri, "res": i, "implicit": false, "reason": _rule(pi, ri).reason}
} else := v if {
	[pi, i] in rbound
	not _result_phase # a result no rule judged goes on
	v := {"set": true, "effect": "deny", "rule": null, "res": i, "implicit": true, "reason": ""}
} else := {"set": false}

# ---------------------------------------------------------------------------
# PolicyExceptions: data.toolgate.exceptions, by name. One is in force for
# a call whose agent_id, folded as frozen agents are, it lists, until its
# expiry on the same clock (input.now, else OPA's). A rule an exception
# names has `not [policy, rule] in _exempt` in its body: exempted, it
# counts as not matching (a rule bound to a resource stays bound).
# ---------------------------------------------------------------------------

_exempt contains t if {
	some x in data.toolgate.exceptions
	_in_force(x)
	some t in x.targets
}

_in_force(x) if {
	x.agents[_agent_fold]
	_now_ns < x.expiresAtNs
}

_in_force_list := [x | some x in data.toolgate.exceptions; _in_force(x)]

# r with exceptionApplied when the decision without exceptions (w) differs
# in decision, effect, deciding level, policy or rule.
_applied(r, w) := object.union(r, {"exceptionApplied": _responsible(r, w)}) if {
	_changed(r, w)
} else := r

_changed(r, w) if r.decision != w.decision

_changed(r, w) if r.effect != w.effect

_changed(r, w) if object.get(r, "matchedPolicyKind", "") != object.get(w, "matchedPolicyKind", "")

_changed(r, w) if r.matchedPolicyId != w.matchedPolicyId

_changed(r, w) if r.matchedRuleId != w.matchedRuleId

# The exception named: the first in force exempting from the rule that
# decided without exceptions; else from any rule of the policy that
# decided; else the first in force.
_responsible(r, w) := n if {
	w.matchedRuleId != null
	n := [x.name | some x in _in_force_list; _names(x, w); w.matchedRuleId in x.rules][0]
} else := n if {
	r.matchedPolicyId != null
	n := [x.name | some x in _in_force_list; _names(x, r)][0]
} else := _in_force_list[0].name

_names(x, r) if {
	x.policy == r.matchedPolicyId
	x.cluster == (object.get(r, "matchedPolicyKind", "") == "ClusterPolicy")
}

# ---------------------------------------------------------------------------
# Shadow (Audit) policies: each decided alone, with the exceptions, as a
# bundle of that one policy would be; recorded in shadow in evaluation
# order, never deciding. Not on AGENT_FROZEN.
# ---------------------------------------------------------------------------

_shadowed(r) := object.union(r, {"shadow": [_shadow_of(pi) | some pi in data.toolgate.shadows]}) if {
	data.toolgate.shadows
} else := r

_shadow_of(pi) := object.remove(
	{"kind": _kind_of(pi), "policy": data.toolgate.policies[pi].id, "decision": v.decision, "rule": v.rule},
	{k | some k, x in {"kind": _kind_of(pi), "rule": v.rule}; x in {null, ""}},
) if {
	v := _alone(pi)
}

_kind_of(pi) := k if {
	k := data.toolgate.policies[pi].kind
} else := ""

_alone(pi) := {"decision": "allow", "rule": null} if {
	# A result, for an Audit policy without result rules, goes on.
	_result_phase
	not data.toolgate.policies[pi].resultRules
} else := {"decision": "deny", "rule": null} if {
	data.toolgate.policies[pi].compileError != ""
} else := v if {
	ri := min({h[1] | some h in shadow_hit; h[0] == pi; _rule(pi, h[1]).effect == "deny"})
	v := {"decision": "deny", "rule": _rule(pi, ri).id}
} else := v if {
	# An ordered policy's first matching ask or redact, as in the scan.
	data.toolgate.asks
	ri := min({h[1] | some h in shadow_hit; h[0] == pi; _rule(pi, h[1]).effect in _sticky})
	v := {"decision": _decision_of(_rule(pi, ri).effect), "rule": _rule(pi, ri).id}
} else := v if {
	ri := max({h[1] | some h in shadow_hit; h[0] == pi})
	v := {"decision": "allow", "rule": _rule(pi, ri).id}
} else := v if {
	pi in data.toolgate.shadowTiered
	# As _tiered_verdict, which covers the enforcing policies only.
	t := _tiered(array.concat([_tool_eval(pi)], [e | some i, _ in _resources; e := _resource_eval(pi, i)]))
	t.set
	v := {"decision": _decision_of(t.effect), "rule": _rule_id(pi, t)}
} else := {"decision": "deny", "rule": null} if {
	_default_denies(pi)
} else := {"decision": "allow", "rule": null}

# ---------------------------------------------------------------------------
# What the gateway filters read from a request; a field of the wrong type
# counts as absent.
# ---------------------------------------------------------------------------

# The call's resources: entries of input.resources with a string type and name.
_resources := [r | some r in input.resources; is_string(r.type); is_string(r.name)] if {
	is_array(input.resources)
} else := []

_server := input.server if {
	is_string(input.server)
} else := s if {
	not "server" in object.keys(input)
	s := _server_of(input.tool_name)
}

# An MCP tool's server: mcp__<server>__<tool>.
_server_of(t) := s if {
	is_string(t)
	startswith(t, "mcp__")
	rest := substring(t, 5, -1)
	i := indexof(rest, "__")
	i > 0
	count(rest) > i + 2
	s := substring(rest, 0, i)
}

_action := input.action if {
	is_string(input.action)
} else := "call"

_confidence := input.actor_confidence if {
	is_string(input.actor_confidence)
} else := "unknown"

_context := input.context if {
	is_object(input.context)
} else := {}

# subjects: the agent or one of the roles is listed; a deny or an ask
# (restrictive) also holds when an identity it is scoped by is missing.
_subjects(agents, _, _) if _agent_fold in agents

_subjects(agents, _, true) if {
	count(agents) > 0
	not _has_agent
}

_subjects(_, roles, true) if {
	count(roles) > 0
	not _has_roles
}

# (`not is_string(input.agent_id)` would be undefined, not true, when
# agent_id is missing: OPA reads a call's arguments outside the `not`.)
_has_agent if is_string(input.agent_id)

_has_roles if is_array(input.roles)

_subjects(_, roles, _) if {
	is_array(input.roles)
	some role in input.roles
	is_string(role)
	role in roles
}

# A resource target of a rule in an ordered policy: any resource touched.
_touches(targets) if {
	some r in _resources
	_binds(r, targets)
}

# The resource is one a rule's targets name: targets maps types to names.
_binds(r, targets) if r.name in targets[r.type]

# select.resourceType in an ordered policy: any resource touched.
_touches_type(t) if {
	some r in _resources
	r.type == t
}

# when.sensitivity: the call's tags, or any touched resource's.
_tagged(listed) if {
	is_array(input.sensitivity)
	some t in input.sensitivity
	t in listed
}

_tagged(listed) if {
	some r in _resources
	is_array(r.sensitivity)
	some t in r.sensitivity
	t in listed
}

# ... in a per-resource evaluation: the call's tags, or the resource's.
_tagged_resource(_, listed) if _tagged_call(listed)

_tagged_resource(r, listed) if {
	is_array(r.sensitivity)
	some t in r.sensitivity
	t in listed
}

_tagged_call(listed) if {
	is_array(input.sensitivity)
	some t in input.sensitivity
	t in listed
}

# when.schedule: one of the windows holds now. Days are weekday names; a
# window crossing midnight belongs to the day it starts (after lists the
# days whose window ends in the small hours of the next day).
_in_schedule(windows) if {
	some w in windows
	_in_window(w)
}

_in_window(w) if {
	w.from < w.to
	[h, m, s] := time.clock([_now_ns, w.zone])
	secs := (h * 3600 + m * 60) + s
	time.weekday([_now_ns, w.zone]) in w.days
	secs >= w.from
	secs < w.to
}

_in_window(w) if {
	w.from > w.to
	[h, m, s] := time.clock([_now_ns, w.zone])
	secs := (h * 3600 + m * 60) + s
	time.weekday([_now_ns, w.zone]) in w.days
	secs >= w.from
}

_in_window(w) if {
	w.from > w.to
	[h, m, s] := time.clock([_now_ns, w.zone])
	secs := (h * 3600 + m * 60) + s
	time.weekday([_now_ns, w.zone]) in w.after
	secs < w.to
}

# Rate limits and token budgets count what the caller supplies in
# input.counts: calls["agent/1m0s"] is how many calls to this tool this
# agent made that were allowed in the trailing minute, tokens["session/1h0m0s"]
# the tokens this session spent in the trailing hour, calls["namespace/1m0s"]
# every agent's, and so on (the window as Go prints a duration; absent
# counts are 0). A shared limit (store: shared) reads its own counter:
# calls["shared/agent/Policy/payments/pay-cap/rateLimit"] is what the shared
# store held for this call's agent and tool before it.
_calls(key) := n if {
	n := input.counts.calls[key]
	is_number(n)
} else := 0

_tokens(key) := n if {
	n := input.counts.tokens[key]
	is_number(n)
} else := 0

# The tokens this call spends: input.tokens when a positive number.
_call_tokens := n if {
	is_number(input.tokens)
	n := _num(input.tokens)
	n > 0
} else := 0

# ---------------------------------------------------------------------------
# The operators, as the engine defines them.
# ---------------------------------------------------------------------------

# A path step that is a decimal number: an object's key, or an array's index.
_at(node, key, _) := node[key] if is_object(node)

_at(node, _, i) := node[i] if is_array(node)

_key(node, key) := node[key] if is_object(node)

_present(_) := true

# is_empty: missing, null, "", [] and {} are empty.
_non_empty(x) if {
	x != null
	x != ""
	x != []
	x != {}
}

_valid_json(x) if {
	is_string(x)
	json.is_valid(x)
}

# eq with a number: the request's number as the engine reads it (float64).
_eq_num(x, c) if {
	is_number(x)
	_num(x) == c
}

# The number gt, gte, lt and lte see: a number, or a string in JSON number
# syntax, read as a float64.
_number(x) := _num(x) if {
	is_number(x)
} else := _num(to_number(x)) if {
	is_string(x)
	regex.match(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`, x)
}

# castToNumber's number: a number, or a string that once ASCII whitespace
# is trimmed and one '+' before its digits dropped is in JSON number syntax,
# read as a float64 (undefined out of its range, as _num is).
_cast(x) := _num(x) if {
	is_number(x)
} else := _num(to_number(trim_prefix(t, "+"))) if {
	is_string(x)
	t := trim(x, " \t\n\u000b\f\r")
	regex.match(`^[+-]?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`, t)
}

_cast_in(n, ns) if {
	some m in ns
	n == m
}

_cast_not_in(n, ns) if {
	every m in ns {
		n != m
	}
}

# _num(x) is the float64 nearest x, as its shortest decimal: what the
# engine's encoding/json decoding makes of a JSON number.
# An integer below 2^53 is its own float64.
_num(x) := x if {
	abs(x) < 9007199254740992
	floor(x) == x
} else := to_number(_go_float(x))

# Go's %v of float64(x): shortest round-trip digits. sprintf formats a
# number written as an integer exactly: one of 16 digits or more is read
# again as a float.
_go_float(x) := g if {
	g := sprintf("%v", [x])
	not _long_integer(g)
} else := sprintf("%v", [to_number(concat("", [sprintf("%v", [x]), ".0"]))])

_long_integer(g) if {
	count(g) >= 16
	not contains(g, ".")
	not contains(g, "e")
}

# Stringify: strings as they are, numbers as JavaScript writes them,
# booleans and null as their JSON words, objects and arrays as compact JSON
# with sorted keys.
_str(x) := x if {
	is_string(x)
} else := _js_number(x) if {
	is_number(x)
} else := "true" if {
	x == true
} else := "false" if {
	x == false
} else := "null" if {
	x == null
} else := _json(x)

# JavaScript's Number#toString of float64(x).
_js_number(x) := "0" if {
	_num(x) == 0
} else := s if {
	g := _go_float(x)
	neg := startswith(g, "-")
	u := trim_prefix(g, "-")
	parts := split(u, "e")
	mant := split(parts[0], ".")
	exp := _exp_of(parts)
	all := concat("", mant)
	digits0 := trim_left(all, "0")
	point := (count(mant[0]) - (count(all) - count(digits0))) + exp
	digits := trim_right(digits0, "0")
	s := concat("", [_sign(neg), _js_digits(digits, point)])
}

_exp_of(parts) := to_number(trim_left(substring(parts[1], 1, -1), "0")) if {
	count(parts) == 2
	startswith(parts[1], "+")
}

_exp_of(parts) := 0 - to_number(trim_left(substring(parts[1], 1, -1), "0")) if {
	count(parts) == 2
	startswith(parts[1], "-")
}

_exp_of(parts) := 0 if count(parts) == 1

_sign(true) := "-"

_sign(false) := ""

_zeros := "000000000000000000000"

# digits d with the decimal point after point digits (0.d when point is 0).
_js_digits(d, point) := concat("", [d, substring(_zeros, 0, point - count(d))]) if {
	count(d) <= point
	point <= 21
}

_js_digits(d, point) := concat("", [substring(d, 0, point), ".", substring(d, point, -1)]) if {
	0 < point
	point < count(d)
	point <= 21
}

_js_digits(d, point) := concat("", ["0.", substring(_zeros, 0, 0 - point), d]) if {
	-6 < point
	point <= 0
}

_js_digits(d, point) := concat("", [_js_mantissa(d), "e", _exp_sign(point - 1), format_int(abs(point - 1), 10)]) if {
	_exponent_form(point)
}

_exponent_form(point) if point > 21

_exponent_form(point) if point <= -6

_js_mantissa(d) := d if count(d) == 1

_js_mantissa(d) := concat("", [substring(d, 0, 1), ".", substring(d, 1, -1)]) if count(d) > 1

_exp_sign(e) := "+" if e >= 0

_exp_sign(e) := "-" if e < 0

# Compact JSON with sorted keys and numbers as JavaScript writes them, not
# escaping <, >, &, U+2028 or U+2029 (encoding/json does).
_json(x) := s if {
	fixed := json.patch(x, [{"op": "replace", "path": p, "value": to_number(_js_number(v))} |
		walk(x, [p, v])
		is_number(v)
	])
	pieces := split(json.marshal(fixed), `\\`)
	s := concat(`\\`, [_unescape_html(piece) | some piece in pieces])
}

_unescape_html(s) := replace(replace(replace(replace(replace(s, `\u003c`, "<"), `\u003e`, ">"), `\u0026`, "&"), `\u2028`, "\u2028"), `\u2029`, "\u2029")
