package cli

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/manifest"
)

// replayBenchLog is n decision-log lines as a sidecar writes them with
// --log-fields input,kwargs: Bash, Read and pay calls of 50 agents over an
// hour, each with its request fields.
func replayBenchLog(n int) []byte {
	start := time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	for i := range n {
		at := start.Add(time.Duration(i) * time.Hour / time.Duration(n)).Format(time.RFC3339Nano)
		agent := fmt.Sprintf("agent-%d", i%50)
		switch i % 3 {
		case 0:
			fmt.Fprintf(&b, `{"time":%q,"decision_id":"k3f9a-%x","session_id":"s-%d","agent_id":%q,"tool_name":"Bash","decision":"allow","effect":"allow","matched_policy_id":"default-deny-readonly","matched_policy_version":1,"matched_rule_id":"read-only-shell","bundle_revision":"sha256:1","latency_ms":0.012,"labels":{"namespace":"agents"},"request":{"input":{"command":"git status"}}}`+"\n", at, i, i%7, agent)
		case 1:
			fmt.Fprintf(&b, `{"time":%q,"decision_id":"k3f9a-%x","session_id":"s-%d","agent_id":%q,"tool_name":"Read","decision":"allow","effect":"allow","matched_policy_id":"default-deny-readonly","matched_policy_version":1,"matched_rule_id":"read-only-tools","bundle_revision":"sha256:1","latency_ms":0.01,"labels":{"namespace":"agents"},"request":{"input":{"file_path":"/workspace/README.md"}}}`+"\n", at, i, i%7, agent)
		default:
			fmt.Fprintf(&b, `{"time":%q,"decision_id":"k3f9a-%x","session_id":"s-%d","agent_id":%q,"tool_name":"pay","decision":"deny","effect":"deny","code":"pay-over-cap","reason":"payments over 1000 need a human approval","matched_policy_id":"pay-cap","matched_policy_version":1,"matched_rule_id":"pay-over-cap","bundle_revision":"sha256:1","latency_ms":0.02,"labels":{"namespace":"agents"},"request":{"kwargs":{"amount":%d}}}`+"\n", at, i, i%7, agent, 500+i%1000*5)
		}
	}
	return b.Bytes()
}

// BenchmarkReplay reads, re-decides and groups 100,000 decision-log lines
// against the samples (make measure-replay): lines/s is the figure the
// target (>= 100,000 lines/s) is about.
func BenchmarkReplay(b *testing.B) {
	const lines = 100_000
	log := replayBenchLog(lines)
	samples, err := filepath.Abs(samplesDir)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(log)))
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		calls, err := readDecisionLogs([]string{manifest.Stdin}, bytes.NewReader(log))
		if err != nil {
			b.Fatal(err)
		}
		f := &sourceFlags{Paths: []string{samples}}
		set, bundle, err := loadBundle(f, nil, calls[0].at)
		if err != nil {
			b.Fatal(err)
		}
		r := newReplayReport(3)
		if err := replayCalls(compileBundle(set, bundle, &bytes.Buffer{}), calls, r); err != nil {
			b.Fatal(err)
		}
		if r.Replayed != lines {
			b.Fatalf("replayed %d", r.Replayed)
		}
	}
	b.ReportMetric(float64(lines)*float64(b.N)/time.Since(start).Seconds(), "lines/s")
}

// BenchmarkParseLoggedDecision is the per-line share of a replay: one
// decision-log line read into a call.
func BenchmarkParseLoggedDecision(b *testing.B) {
	lines := bytes.Split(bytes.TrimSpace(replayBenchLog(3)), []byte("\n"))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := parseLoggedDecision(lines[i%3]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
