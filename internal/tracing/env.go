package tracing

import (
	"fmt"
	"strings"
)

// The variables that decide whether tracing is on, and which exporter and
// protocol it uses (the OpenTelemetry specification's
// sdk-environment-variables and OTLP exporter configuration). The rest of
// OTEL_* (endpoints, headers, timeout, compression, certificates,
// sampler, batch processor, span limits, resource) is read by the SDK
// itself; docs/observability.md lists them.
const (
	envSDKDisabled             = "OTEL_SDK_DISABLED"
	envTracesExporter          = "OTEL_TRACES_EXPORTER"
	envEndpoint                = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint          = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol                = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol          = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	exporterOTLP, exporterNone = "otlp", "none"
)

// Enabled tells from the environment (getenv: os.Getenv) whether spans are
// exported. The specification's default exporter is otlp, but a sidecar
// next to every agent must not start sending to localhost:4318 because
// nothing said otherwise, so toolgate traces only when asked: when
// OTEL_TRACES_EXPORTER is otlp, or when it is unset and an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is
// set. OTEL_SDK_DISABLED=true turns it off whatever else is set, and
// OTEL_TRACES_EXPORTER=none too. An exporter or protocol toolgate does not
// ship is an error naming the variable, never a silent no-op.
func Enabled(getenv func(string) string) (bool, error) {
	if v := strings.TrimSpace(getenv(envSDKDisabled)); strings.EqualFold(v, "true") {
		return false, nil
	} else if v != "" && !strings.EqualFold(v, "false") {
		return false, fmt.Errorf("%s=%q: want true or false", envSDKDisabled, v)
	}
	on := false
	if v := strings.TrimSpace(getenv(envTracesExporter)); v != "" {
		for _, e := range strings.Split(v, ",") {
			switch e = strings.TrimSpace(e); e {
			case exporterOTLP:
				on = true
			case exporterNone:
				return false, nil
			default:
				return false, fmt.Errorf("%s=%q: toolgate exports traces with otlp only (or none)", envTracesExporter, v)
			}
		}
	} else {
		on = getenv(envEndpoint) != "" || getenv(envTracesEndpoint) != ""
	}
	if !on {
		return false, nil
	}
	protocol := getenv(envTracesProtocol)
	name := envTracesProtocol
	if protocol == "" {
		protocol, name = getenv(envProtocol), envProtocol
	}
	switch protocol {
	case "", "http/protobuf", "http/json":
		return true, nil
	default:
		return false, fmt.Errorf("%s=%q: toolgate exports OTLP over HTTP only (http/protobuf or http/json); point it at the collector's HTTP port, 4318", name, protocol)
	}
}
