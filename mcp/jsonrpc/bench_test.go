package jsonrpc

import (
	"strings"
	"testing"
)

// BenchmarkParseMCPBody reads a tools/call with a 1 KiB argument: the
// one-pass scanner beside the encoding/json reading it replaced.
func BenchmarkParseMCPBody(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"` + strings.Repeat("p", 1024) + `"}}}`)
	for _, c := range []struct {
		name  string
		parse func([]byte) ([]Message, bool, error)
	}{{"scanner", Parse}, {"encoding-json-before", refParseMCPBody}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if msgs, _, err := c.parse(body); err != nil || msgs[0].Call == nil {
					b.Fatal("not read as a call", err)
				}
			}
		})
	}
}
