package tracing

import (
	"strings"
	"testing"
)

// TestEnabledFollowsOTELEnvironment: tracing is off unless the environment
// asks for it; OTEL_SDK_DISABLED and OTEL_TRACES_EXPORTER=none turn it
// off; an exporter or protocol toolgate does not ship is an error naming
// the variable.
func TestEnabledFollowsOTELEnvironment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		env     map[string]string
		on      bool
		wantErr string
	}{
		{name: "nothing set: off", env: nil},
		{name: "an endpoint", env: map[string]string{envEndpoint: "http://127.0.0.1:4318"}, on: true},
		{name: "a traces endpoint", env: map[string]string{envTracesEndpoint: "http://127.0.0.1:4318/v1/traces"}, on: true},
		{name: "exporter otlp, default endpoint", env: map[string]string{envTracesExporter: "otlp"}, on: true},
		{name: "exporter none beats an endpoint", env: map[string]string{envTracesExporter: "none", envEndpoint: "http://127.0.0.1:4318"}},
		{name: "SDK disabled beats everything", env: map[string]string{envSDKDisabled: "true", envTracesExporter: "otlp", envEndpoint: "http://x"}},
		{name: "SDK disabled TRUE", env: map[string]string{envSDKDisabled: "TRUE", envEndpoint: "http://x"}},
		{name: "SDK disabled false", env: map[string]string{envSDKDisabled: "false", envEndpoint: "http://x"}, on: true},
		{name: "SDK disabled garbage", env: map[string]string{envSDKDisabled: "yes", envEndpoint: "http://x"}, wantErr: envSDKDisabled},
		{name: "exporter zipkin", env: map[string]string{envTracesExporter: "zipkin"}, wantErr: envTracesExporter},
		{name: "exporter list with console", env: map[string]string{envTracesExporter: "otlp,console"}, wantErr: envTracesExporter},
		{name: "grpc protocol", env: map[string]string{envEndpoint: "http://x", envProtocol: "grpc"}, wantErr: envProtocol},
		{name: "traces protocol beats the general one", env: map[string]string{envEndpoint: "http://x", envProtocol: "grpc", envTracesProtocol: "http/protobuf"}, on: true},
		{name: "http/json", env: map[string]string{envEndpoint: "http://x", envTracesProtocol: "http/json"}, on: true},
		{name: "a protocol alone turns nothing on", env: map[string]string{envProtocol: "grpc"}},
	} {
		on, err := Enabled(func(k string) string { return tc.env[k] })
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v, want one naming %s", tc.name, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case on != tc.on:
			t.Errorf("%s: on=%v, want %v", tc.name, on, tc.on)
		}
	}
}
