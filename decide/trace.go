package decide

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/decisionlog"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/tracing"
)

// SpanDecision is the name of a decision's span.
const SpanDecision = "toolgate.decision"

// The attributes of a decision's span: what the decision log says of it.
const (
	AttrDecision       = "toolgate.decision"
	AttrEffect         = "toolgate.effect"
	AttrCode           = "toolgate.code"
	AttrRuleID         = "toolgate.rule_id"
	AttrPolicyID       = "toolgate.policy_id"
	AttrPolicyVersion  = "toolgate.policy_version"
	AttrBundleRevision = "toolgate.bundle_revision"
	AttrToolName       = "toolgate.tool_name"
	AttrDecisionID     = "toolgate.decision_id"
)

// traceDecision makes the span of a decision settled now, begun when its
// request arrived (ev.At), under ctx's span: the caller's traceparent
// (/v1/evaluate) or the MCP call's span. It is made whole at the end, from
// what Settle knows, so the decision path itself carries no span; called
// only when tracing is on.
func (d *Decider) traceDecision(ctx context.Context, ev *decisionlog.Event, res *engine.Result, effect engine.Effect, revision string) {
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs,
		attribute.String(AttrDecision, string(res.Decision)),
		attribute.String(AttrEffect, string(effect)),
		attribute.String(AttrToolName, ev.ToolName),
		// Base 36, as the answer and the decision log write the id.
		attribute.String(AttrDecisionID, d.idPrefix+strconv.FormatUint(ev.ID, 36)))
	if code := res.StatedCode(); code != "" {
		// The code the answer states: a rule's deny is coded by its id.
		attrs = append(attrs, attribute.String(AttrCode, string(code)))
	}
	if res.MatchedRuleID != "" {
		attrs = append(attrs, attribute.String(AttrRuleID, res.MatchedRuleID))
	}
	if res.MatchedPolicyID != "" {
		attrs = append(attrs, attribute.String(AttrPolicyID, res.MatchedPolicyID),
			attribute.Int64(AttrPolicyVersion, res.MatchedPolicyVersion))
	}
	if revision != "" {
		attrs = append(attrs, attribute.String(AttrBundleRevision, revision))
	}
	_, span := tracing.Tracer().Start(ctx, SpanDecision, trace.WithTimestamp(ev.At), trace.WithAttributes(attrs...))
	if res.Code == CodeInternalError {
		// The sidecar failed: a deny, and an error of the sidecar's own.
		span.SetStatus(codes.Error, res.Reason)
	}
	span.End(trace.WithTimestamp(time.Now()))
}
