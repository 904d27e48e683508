package bundlesource

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/toolgate/toolgate/engine"
)

func raw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// denyTools is a bundle whose one policy denies the named tools and allows
// everything else.
func denyTools(tools ...string) engine.Bundle {
	p := engine.Policy{ID: "deny-tools", Version: 1, DefaultEffect: "allow"}
	for i, tool := range tools {
		p.Rules = append(p.Rules, engine.Rule{ID: fmt.Sprintf("deny-%d", i), Effect: "deny",
			Conditions: []engine.Condition{{Field: "tool_name", Operator: "eq", Value: raw(tool)}}})
	}
	return engine.Bundle{Policies: []engine.Policy{p}}
}

func encode(t testing.TB, b engine.Bundle) ([]byte, string) {
	t.Helper()
	doc, rev, err := engine.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	return doc, rev
}

func gzipped(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
