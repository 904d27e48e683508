package decisionlog

import "net/http"

// TraceOf reads a request's W3C traceparent header
// (version-traceid-parentid-flags, https://www.w3.org/TR/trace-context/)
// for the decision log: the caller's trace id and span id, so a decision
// can be found from the agent's trace. A header that does not parse is
// ignored, as the specification asks, never an error: tracing must not
// change a decision.
func TraceOf(h http.Header) (traceID, spanID string) {
	v := h["Traceparent"] // canonical key: no allocation to look it up
	if len(v) != 1 {
		return "", ""
	}
	traceID, spanID, _ = ParseTraceparent(v[0])
	return traceID, spanID
}

// ParseTraceparent returns the trace id, parent id and flags of a valid
// header, all "" for one that is not: lower-case hex, neither id all
// zeros, version ff refused, version 00 exactly 55 characters, later
// versions at least that with a '-' after the flags. The decision log and
// the spans (internal/tracing) read a traceparent through it alike.
func ParseTraceparent(s string) (traceID, spanID, flags string) {
	if len(s) < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return "", "", ""
	}
	version, trace, span, flags := s[:2], s[3:35], s[36:52], s[53:55]
	if !lowerHex(version) || version == "ff" || !lowerHex(trace) || !lowerHex(span) || !lowerHex(flags) ||
		allZeros(trace) || allZeros(span) {
		return "", "", ""
	}
	if (version == "00" && len(s) != 55) || (len(s) > 55 && s[55] != '-') {
		return "", "", ""
	}
	return trace, span, flags
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func allZeros(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}
