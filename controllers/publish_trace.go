package controllers

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/internal/tracing"
)

// SpanPublish is the name of a bundle publish's span: one per write of a
// namespace's bundle ConfigMap the reconciler attempts, with its result.
const SpanPublish = "toolgate.bundle.publish"

// The attributes of a publish's span.
const (
	AttrNamespace      = "toolgate.namespace"
	AttrBundleRevision = "toolgate.bundle_revision"
	AttrBundleBytes    = "toolgate.bundle_bytes"
	AttrPublishResult  = "toolgate.publish.result"
)

// tracePublish starts the span of publishing p in ns when tracing is on;
// end ends it with the result (resultPublished, resultUnchanged or
// resultFailed) and the error of a failure.
func tracePublish(ctx context.Context, ns string, p payload) (context.Context, func(result string, err error)) {
	if !tracing.On() {
		return ctx, func(string, error) {}
	}
	ctx, span := tracing.Tracer().Start(ctx, SpanPublish, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String(AttrNamespace, ns),
		attribute.String(AttrBundleRevision, p.revision),
		attribute.Int(AttrBundleBytes, p.size)))
	return ctx, func(result string, err error) {
		span.SetAttributes(attribute.String(AttrPublishResult, result))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
