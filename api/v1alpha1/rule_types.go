package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Rule is a set of filters (subjects, targets, select, when, conditions)
// and the effect when all of them hold; a rule without any matches every
// call.
//
// What a phase allows is checked here, so it holds with the webhook down;
// the engine's compile step says the same (engine.checkPhase).
// +kubebuilder:validation:XValidation:rule="self.effect != 'redact' || (has(self.phase) && self.phase == 'result')",fieldPath=".effect",message="effect redact is only for result rules (phase: result): a call has no output to redact"
// +kubebuilder:validation:XValidation:rule="!has(self.phase) || self.phase != 'result' || self.effect != 'ask'",fieldPath=".effect",message="effect ask is only for call rules: a result rule runs after the tool did, when there is nothing left to approve (use deny or redact)"
// +kubebuilder:validation:XValidation:rule="!has(self.phase) || self.phase != 'result' || !has(self.when) || (!has(self.when.rateLimit) && !has(self.when.tokenBudget))",fieldPath=".when",message="rateLimit and tokenBudget are only for call rules: a result rule counts nothing (its call was counted when it was decided)"
type Rule struct {
	// id names the rule in decisions and status; unique in the policy.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ID string `json:"id"`

	// description is returned as the reason when this rule denies, warns or
	// audits.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// priority is the rule's tier in a tiered policy: only the matching rules
	// of the highest priority decide. Negative values are allowed; an
	// ordered policy must leave it 0.
	// +optional
	Priority int32 `json:"priority,omitempty"`

	// phase is when the rule runs: call (the default) decides whether a
	// tool may run; result judges what it returned, with the call's fields
	// and output (output.text, output.structured, output.isError,
	// output.size).
	// +optional
	Phase RulePhase `json:"phase,omitempty"`

	// effect is allow, deny, warn (allow, with the reason in the result's
	// warnings), audit (allow, marked for audit), ask (held until a
	// person approves this exact call: an ApprovalRequest; the description
	// is the reason the approver is shown; call rules only) or redact
	// (result rules only: the output goes on with what the rule's
	// matches, contains and detect conditions on output.text matched
	// replaced by [REDACTED:<rule id>]).
	// +required
	Effect RuleEffect `json:"effect"`

	// approval sets how an ask rule's calls wait; only on effect: ask.
	// +optional
	Approval *RuleApproval `json:"approval,omitempty"`

	// subjects scopes the rule to agents or roles; none: everyone.
	// +optional
	Subjects *Subjects `json:"subjects,omitempty"`

	// targets binds the rule to MCP servers, tools and resources.
	// +optional
	Targets *Targets `json:"targets,omitempty"`

	// select is the resource selector: every key present must hold.
	// +optional
	Select *Select `json:"select,omitempty"`

	// when holds context conditions: time windows, environment, sensitivity,
	// actor confidence, rate limits and token budgets.
	// +optional
	When *When `json:"when,omitempty"`

	// No MinItems, unlike the gateway lists: stored policies may carry an
	// empty list.

	// conditions must all hold for the rule to match; none matches every call.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Conditions []Condition `json:"conditions,omitempty"`
}

// RuleApproval is how long an ask rule's call waits for a decision.
type RuleApproval struct {
	// timeout is how long an ApprovalRequest stays open (a Go duration,
	// at most 1h); 5m when absent. A call still undecided then is denied
	// APPROVAL_TIMEOUT.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Timeout string `json:"timeout,omitempty"`
}

// Conditions nest at most any -> all -> leaf (seed 002's "or", one level).
// controller-gen cannot generate a recursive schema, so each level is its
// own type: Condition may hold any, AnyCondition may hold all, LeafCondition
// holds neither. The groups a level may not hold are declared with
// maxItems 0 rather than left out: a field the schema does not know is
// pruned, silently unless the client asks for strict field validation, and
// a pruned group changes what the condition means; a declared one is
// refused with its path whatever the client.
//
// Not in CEL: "in needs values", "a group takes no value" and the like.
// value and values hold any JSON scalar, so they are untyped in the schema,
// and the API server rejects CEL rules over untyped fields ("undefined
// field"); the engine checks them.

// Three CEL rules rather than one, so that each error names its field. The
// schema rejects malformed paths itself (so they fail even with the webhook
// bypassed); the webhook adds what needs the engine: value types, regexes,
// forbidden segments.
// +kubebuilder:validation:XValidation:rule="has(self.any) || has(self.field)",fieldPath=".field",message="field is required: a condition is a test (field and operator) or a group (any)"
// +kubebuilder:validation:XValidation:rule="has(self.any) || has(self.operator)",fieldPath=".operator",message="operator is required: a condition is a test (field and operator) or a group (any)"
// +kubebuilder:validation:XValidation:rule="!has(self.any) || (!has(self.field) && !has(self.operator))",fieldPath=".any",message="a group (any) takes no field or operator: move the test into the group"

// Condition tests one field of the tool call, or is an any group.
type Condition struct {
	// field is a dot-path into the request: tool_name, agent_id,
	// input.command, kwargs.amount, args.0.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[^.]+([.][^.]+){0,15}$`
	Field string `json:"field,omitempty"`

	// operator is how the field is compared.
	// +optional
	Operator Operator `json:"operator,omitempty"`

	// value is a JSON scalar (string, number or bool).
	// +optional
	Value *apiextensionsv1.JSON `json:"value,omitempty"`

	// values is a list of JSON scalars, for in and not_in.
	// +optional
	// +kubebuilder:validation:MaxItems=1024
	Values []apiextensionsv1.JSON `json:"values,omitempty"`

	// castToNumber reads the field, and value or each of values, as numbers
	// before comparing: ASCII whitespace trimmed, a leading '+' and
	// exponents accepted ("+5000", " 5e3 "); hex, inf, NaN, underscores and
	// out-of-range values never parse, and the condition is then false.
	// Only for eq, neq, in, not_in, gt, gte, lt and lte.
	// +optional
	CastToNumber bool `json:"castToNumber,omitempty"`

	// any holds when one of its members does: each a test or an all group.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Any []AnyCondition `json:"any,omitempty"`

	// all is not allowed here: all groups live inside any (a rule's
	// conditions are already AND-ed). Declared so the API server refuses it
	// rather than dropping it.
	// +optional
	// +kubebuilder:validation:MaxItems=0
	All []apiextensionsv1.JSON `json:"all,omitempty"`
}

// AnyCondition is a member of an any group: a test, or an all group.
// +kubebuilder:validation:XValidation:rule="has(self.all) || has(self.field)",fieldPath=".field",message="field is required: a member of any is a test (field and operator) or a group (all)"
// +kubebuilder:validation:XValidation:rule="has(self.all) || has(self.operator)",fieldPath=".operator",message="operator is required: a member of any is a test (field and operator) or a group (all)"
// +kubebuilder:validation:XValidation:rule="!has(self.all) || (!has(self.field) && !has(self.operator))",fieldPath=".all",message="a group (all) takes no field or operator: move the test into the group"
type AnyCondition struct {
	// field is a dot-path into the request, as in a condition.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[^.]+([.][^.]+){0,15}$`
	Field string `json:"field,omitempty"`

	// operator is how the field is compared.
	// +optional
	Operator Operator `json:"operator,omitempty"`

	// value is a JSON scalar (string, number or bool).
	// +optional
	Value *apiextensionsv1.JSON `json:"value,omitempty"`

	// values is a list of JSON scalars, for in and not_in.
	// +optional
	// +kubebuilder:validation:MaxItems=1024
	Values []apiextensionsv1.JSON `json:"values,omitempty"`

	// castToNumber reads the field, and value or each of values, as numbers
	// before comparing: ASCII whitespace trimmed, a leading '+' and
	// exponents accepted ("+5000", " 5e3 "); hex, inf, NaN, underscores and
	// out-of-range values never parse, and the condition is then false.
	// Only for eq, neq, in, not_in, gt, gte, lt and lte.
	// +optional
	CastToNumber bool `json:"castToNumber,omitempty"`

	// all holds when every one of its tests does; nesting stops here.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	All []LeafCondition `json:"all,omitempty"`

	// any is not allowed here: groups nest at most any -> all -> test.
	// Declared so the API server refuses it rather than dropping it.
	// +optional
	// +kubebuilder:validation:MaxItems=0
	Any []apiextensionsv1.JSON `json:"any,omitempty"`
}

// LeafCondition is a test inside an all group.
type LeafCondition struct {
	// field is a dot-path into the request, as in a condition.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[^.]+([.][^.]+){0,15}$`
	Field string `json:"field"`

	// operator is how the field is compared.
	// +required
	Operator Operator `json:"operator"`

	// value is a JSON scalar (string, number or bool).
	// +optional
	Value *apiextensionsv1.JSON `json:"value,omitempty"`

	// values is a list of JSON scalars, for in and not_in.
	// +optional
	// +kubebuilder:validation:MaxItems=1024
	Values []apiextensionsv1.JSON `json:"values,omitempty"`

	// castToNumber reads the field, and value or each of values, as numbers
	// before comparing: ASCII whitespace trimmed, a leading '+' and
	// exponents accepted ("+5000", " 5e3 "); hex, inf, NaN, underscores and
	// out-of-range values never parse, and the condition is then false.
	// Only for eq, neq, in, not_in, gt, gte, lt and lte.
	// +optional
	CastToNumber bool `json:"castToNumber,omitempty"`

	// any and all are not allowed here: groups nest at most any -> all ->
	// test. Declared so the API server refuses them rather than dropping
	// them.
	// +optional
	// +kubebuilder:validation:MaxItems=0
	Any []apiextensionsv1.JSON `json:"any,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=0
	All []apiextensionsv1.JSON `json:"all,omitempty"`
}
