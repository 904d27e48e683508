package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// orderedDigest hashes everything issue 9 promises unchanged for bundles
// without its fields (decision, matched ids, reason, code, trace entries),
// over the old differential generator's cases. Compile errors count only
// by whom they name: their messages list the effects, which issue 9
// extends.
func orderedDigest(t *testing.T, cases int) string {
	t.Helper()
	h := sha256.New()
	for _, data := range differentialInputs(cases) {
		g := &genSource{data: data}
		b := g.bundle(t0)
		c, _ := Compile(b)
		for range 3 {
			req := g.request()
			for _, o := range []EvalOptions{{Explain: true}, {Explain: true, MaxTrace: 3}} {
				o.Now, o.Budget = fixedClock(t0), time.Hour
				res := c.Evaluate(Request(req), o)
				doc, err := json.Marshal(res.Trace)
				if err != nil {
					t.Fatal(err)
				}
				var entries []map[string]any
				if err := json.Unmarshal(doc, &entries); err != nil {
					t.Fatal(err)
				}
				reason := res.Reason
				for _, e := range entries {
					if _, ok := e["compileError"]; ok {
						e["compileError"] = strings.Contains(e["compileError"].(string), res.MatchedPolicyID)
					}
				}
				if res.Code == CodePolicyCompileError {
					reason = fmt.Sprint(strings.Contains(reason, res.MatchedPolicyID))
				}
				trace, err := json.Marshal(entries)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(h, "%s|%s|%d|%s|%s|%q|%v|%s\n", res.Decision, res.MatchedPolicyID, res.MatchedPolicyVersion,
					res.MatchedRuleID, res.Code, reason, res.TraceTruncated, trace)
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// orderedDigestBefore is orderedDigest(t, 1000) computed with the engine
// of commit 62c4617, before issue 9. It also depends on the generator
// (genSource.bundle and request) and differentialInputs: changing those
// means recomputing it there.
const orderedDigestBefore = "340b1a7e4a3313c108ba878a91e1e1b753374443eb609c067b61431ac3750df9"

// TestOrderedResultsUnchanged: for bundles without issue 9's fields every
// decision, matched id, reason, code and trace entry is what it was.
func TestOrderedResultsUnchanged(t *testing.T) {
	t.Parallel()
	if got := orderedDigest(t, 1000); got != orderedDigestBefore {
		t.Errorf("digest %s, before issue 9 %s", got, orderedDigestBefore)
	}
}
