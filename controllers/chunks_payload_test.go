package controllers

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

// A gzipped document past one ConfigMap is stored in parts that reassemble
// to it; equal documents give equal parts and index; past MaxParts parts
// it is BundleTooLarge saying how many it would need.
func TestRenderPayloadChunks(t *testing.T) {
	doc, rev := testenv.Encode(t, bundle.Build(testenv.ManyRulePolicies("ns", 2000), nil, time.Time{}))
	p, err := renderPayload(doc, rev, 1000, indexReserve+1000, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.chunks == nil || p.data != nil || p.binaryData != nil {
		t.Fatalf("want a chunked payload, got data %v binaryData %v", p.data, p.binaryData)
	}
	p = p.indexed("toolgate-bundle")
	ix, err := bundle.ParseIndex([]byte(p.data[bundle.IndexKey]), "toolgate-bundle")
	if err != nil || p.partCount() != len(ix.Parts) || ix.Revision != rev {
		t.Fatalf("index %+v, %v; %d parts", ix, err, p.partCount())
	}
	gz, err := bundle.Assemble(ix, func(name string) ([]byte, error) {
		for i, n := range p.chunks.names {
			if n == name {
				return p.chunks.parts[i], nil
			}
		}
		return nil, fmt.Errorf("no part %s", name)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := bundle.ReadDocument(gz, true); err != nil || !bytes.Equal(got, doc) {
		t.Fatalf("the parts reassemble to %d bytes, %v; want the %d-byte document", len(got), err, len(doc))
	}
	again, _ := renderPayload(doc, rev, 1000, indexReserve+1000, 0, nil)
	if again = again.indexed("toolgate-bundle"); again.data[bundle.IndexKey] != p.data[bundle.IndexKey] {
		t.Fatal("the same document indexed twice differs: every reconcile would rewrite the bundle")
	}
	if p.indexed("other").data[bundle.IndexKey] != p.data[bundle.IndexKey] {
		t.Fatal("indexing an indexed payload again changed it")
	}

	// Past MaxParts parts: 10,000 rules gzip to about 280 KB, more than 16
	// parts of 16 KiB.
	big, bigRev := testenv.Encode(t, bundle.Build(testenv.ManyRulePolicies("ns", 10_000), nil, time.Time{}))
	_, err = renderPayload(big, bigRev, 1000, indexReserve, 0, nil)
	var tooLarge *errBundleTooLarge
	if !errors.As(err, &tooLarge) || tooLarge.parts <= bundle.MaxParts || !strings.Contains(err.Error(), fmt.Sprintf("more than %d ConfigMaps", bundle.MaxParts)) {
		t.Fatalf("past MaxParts: %v", err)
	}
	// A Rego bundle that leaves the ConfigMap no room for the index.
	_, err = renderPayload(doc, rev, 1000, indexReserve+1000, 0, bytes.Repeat([]byte{1}, 1001))
	if !errors.As(err, &tooLarge) || tooLarge.rego != 1001 || !strings.Contains(err.Error(), "--publish-rego") {
		t.Fatalf("the Rego bundle leaving no room for the index: %v", err)
	}
}

// TestBundleSizes prints rules -> document bytes -> gzip bytes -> parts at
// the default limits, for ManyRulePolicies' realistic variety: the table
// in docs/bundle-size.md. TOOLGATE_SIZES_UP_TO raises the largest size
// measured (default 20,000 rules).
func TestBundleSizes(t *testing.T) {
	sizes := []int{100, 1000, 5000, 10_000, 20_000}
	if v := os.Getenv("TOOLGATE_SIZES_UP_TO"); v != "" {
		var n int
		if _, err := fmt.Sscan(v, &n); err != nil || n <= 0 {
			t.Fatalf("TOOLGATE_SIZES_UP_TO=%q is not a positive number of rules", v)
		}
		sizes = append(sizes, n)
	}
	var table strings.Builder
	table.WriteString("| rules | descriptions | document | gzipped | stored as | compile |\n|---:|---|---:|---:|---|---:|\n")
	type row struct {
		n, words int
	}
	var rows []row
	for _, n := range sizes {
		rows = append(rows, row{n, 0})
	}
	// The verbose end: every rule with a description of about 100 words.
	for _, n := range []int{5000, 9000, 10_000} {
		rows = append(rows, row{n, 100})
	}
	for _, r := range rows {
		n := r.n
		policies := testenv.ManyRulePolicies("ns", n)
		if r.words > 0 {
			policies = testenv.WithDescriptions(policies, r.words)
		}
		b := bundle.Build(policies, nil, time.Time{})
		doc, rev := testenv.Encode(t, b)
		start := time.Now()
		if _, diags := engine.Compile(b); len(diags) > 0 {
			t.Fatalf("%d rules: %v", n, diags[0])
		}
		compile := time.Since(start)
		p, err := renderPayload(doc, rev, DefaultCompressAbove, DefaultMaxStoredBytes, 0, nil)
		var stored string
		gz := p.size
		switch {
		case err != nil:
			stored = "refused (BundleTooLarge)"
			gz = len(testenv.Gzipped(t, doc))
		case p.chunks != nil:
			stored = fmt.Sprintf("%d parts", p.indexed("toolgate-bundle").partCount())
		case p.binaryData != nil:
			stored = "one ConfigMap, gzipped"
		default:
			stored = "one ConfigMap, text"
		}
		if err == nil && p.data != nil && p.binaryData == nil {
			gz = len(testenv.Gzipped(t, doc))
		}
		words := "short"
		if r.words > 0 {
			words = fmt.Sprintf("%d words", r.words)
		}
		fmt.Fprintf(&table, "| %d | %s | %d | %d | %s | %s |\n", n, words, len(doc), gz, stored, compile.Round(time.Millisecond))
	}
	t.Log("\n" + table.String())
}
