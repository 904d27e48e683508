package testenv

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/toolgate/toolgate/engine"
)

// DenyTools is a bundle whose one policy denies the named tools and allows
// everything else.
func DenyTools(tools ...string) engine.Bundle {
	p := engine.Policy{ID: "deny-tools", Version: 1, DefaultEffect: "allow"}
	for i, tool := range tools {
		v, err := json.Marshal(tool)
		if err != nil {
			panic(err)
		}
		p.Rules = append(p.Rules, engine.Rule{ID: fmt.Sprintf("deny-%d", i), Effect: "deny",
			Conditions: []engine.Condition{{Field: "tool_name", Operator: "eq", Value: v}}})
	}
	return engine.Bundle{Policies: []engine.Policy{p}}
}

// Encode is b's bundle document and revision.
func Encode(t testing.TB, b engine.Bundle) ([]byte, string) {
	t.Helper()
	doc, rev, err := engine.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	return doc, rev
}

// Gzipped is b gzip-compressed.
func Gzipped(t testing.TB, b []byte) []byte {
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
