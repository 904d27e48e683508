// Package tracing is toolgate's OpenTelemetry: the one place that reads
// the OTEL_* environment, holds the tracer provider and its OTLP/HTTP
// exporter, and turns a caller's traceparent into a span's parent. The
// decision core (decide), the MCP proxy (mcp) and the operator's bundle
// publish (controllers) make their spans through it; engine/ never sees
// it.
//
// Tracing is off unless the environment asks for it (Enabled), and off it
// costs one atomic load per span that would have been made (On): the
// decision path allocates nothing for it.
package tracing
