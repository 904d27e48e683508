package regodiff

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/toolgate/toolgate/engine/detect"
	torego "github.com/toolgate/toolgate/rego"
)

// detectFragments are secrets, personal data and their near misses
// (engine/detect's corpus in spirit): texts are made of them.
var detectFragments = []string{
	"AKIAIOSFODNN7EXAMPLE", "ASIAY34FZKBOKMUTVV7A", "AKIAIOSFODNN7EXAMPL", "xAKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN0EXAMPLE",
	"-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "-----BEGIN OPENSSH PRIVATE KEY-----", "-----BEGIN PUBLIC KEY-----",
	"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0",
	"ghp_16C7e42F292c6912E7710c838347Ae178B4a", "ghp_16C7e42F292c6912E7710c838347Ae178B4", "xoxb-2048-1234567890-AbCdEf", "xoxb-123456789",
	"hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
	`"api_key": "sk_live_4eC39HqLyjWDarjtT1zdp7dc"`, "DB_PASSWORD=correcthorsebatterystaple", "token=abcdefghijklmno", "X-Api-Key = abcdefghijklmnop",
	"4111 1111 1111 1111", "5555-5555-5555-4444", "2223003122003222", "3782 822463 10005", "6011111111111117", "3530111333300000",
	"30569309025904", "4111 1111 1111 1112", "1234 5678 9012 3452", "94111111111111111", "4111 1111 1118", "6441111111111114", "3000000000000004",
	"GB82 WEST 1234 5698 7654 32", "GB82WEST12345698765432", "DE89370400440532013000", "DE89370400440532013001", "ZZ89370400440532013000",
	"FR7630006000011234567890189", "NL91ABNA0417164300", "GB82 WEST 1234",
	"123-45-6789", "666-12-3456", "900-12-3456", "123-00-6789", "123-45-0000", "000-12-3456",
	"jane.doe@example.com", "a@b.c", "x@example.co.uk", "@example.com",
	"4111111111111111-", "12345678901234567890", "AKIA", "-----", "eyJ", "\n", " ", ", ", "=", ":", "\"", "'", "é", "x",
}

// TestRegoDetectors: the exported detect (each detector's pattern and its
// check in Rego) finds something exactly where engine/detect's Scanner
// does, for each detector alone and for all of them, over texts made of
// secrets, personal data and near misses.
func TestRegoDetectors(t *testing.T) {
	data := map[string]any{torego.Root: torego.DetectData()}
	q, err := rego.New(
		rego.Query("data.toolgate._detect(input.text, input.names)"),
		rego.Module("detect.rego", "package toolgate\n\n"+torego.DetectRego),
		rego.Store(inmem.NewFromObject(data)),
	).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	names := detect.Names()
	scanners := map[string]*detect.Scanner{}
	for _, n := range names {
		if scanners[n], err = detect.New(n); err != nil {
			t.Fatal(err)
		}
	}
	all, err := detect.New(names...)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(28, 5))
	compared, found, mismatches := 0, map[string]int{}, 0
	for range 1500 {
		var b strings.Builder
		for range 1 + rng.IntN(4) {
			b.WriteString(detectFragments[rng.IntN(len(detectFragments))])
			b.WriteString(detectFragments[len(detectFragments)-1-rng.IntN(10)])
		}
		text := b.String()
		check := func(label string, sc *detect.Scanner, ns []string) {
			_, want := sc.First(text)
			rs, err := q.Eval(context.Background(), rego.EvalInput(map[string]any{"text": text, "names": ns}))
			if err != nil {
				t.Fatal(err)
			}
			got := len(rs) > 0 && rs[0].Expressions[0].Value == true
			compared++
			if want {
				found[label]++
			}
			if got != want && mismatches < 10 {
				mismatches++
				t.Errorf("%s in %q: OPA %v, engine %v", label, text, got, want)
			}
		}
		for _, n := range names {
			check(n, scanners[n], []string{n})
		}
		check("all", all, names)
	}
	t.Logf("detect: %d texts x detectors compared, %d mismatches; found by the engine: %v", compared, mismatches, found)
	for _, n := range names {
		if found[n] < 20 {
			t.Errorf("detector %s found something in only %d texts", n, found[n])
		}
	}
}
