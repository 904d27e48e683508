// Package conformance reads config/samples/expected-decisions.json: the
// request/decision pairs every toolgate client (Go, Python, TypeScript, the
// CLI) must decide identically. It is the Go side's one reader of that file.
package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/toolgate/toolgate/engine"
)

// File is the set's name under the samples directory.
const File = "expected-decisions.json"

// Case is one request and the fields its decision must have, as the
// sidecar writes them (nil where it writes null or nothing).
type Case struct {
	// Request is the request file's name under the samples' requests/.
	Request string `json:"request"`
	// Now, when set, is the instant the case is decided at: only an
	// evaluator with an injectable clock runs it.
	Now string `json:"now,omitempty"`
	// Phase is "result" for a case whose request carries output (what
	// the tool returned): only result rules judge it, as /v1/evaluate
	// judges such a request (toolgate eval needs --phase result). Empty
	// is a call. Load checks that the phase and the request agree.
	Phase  engine.Phase `json:"phase,omitempty"`
	Expect Expect       `json:"expect"`
	// Asks marks a case its rule asks a person about (effect ask). Expect
	// is then what a sidecar that cannot ask answers (a bundle from a
	// file, as the clients' tests run it; client/local alike): deny
	// APPROVAL_UNAVAILABLE, the asking rule kept. Offline is what the
	// engine itself answers (toolgate eval).
	Asks bool `json:"asks,omitempty"`

	// Body is the request file's content.
	Body []byte `json:"-"`
	// At is Now parsed (zero without Now).
	At time.Time `json:"-"`
}

// Expect is what a conforming decision has.
type Expect struct {
	Decision             string  `json:"decision"`
	Effect               string  `json:"effect"`
	MatchedPolicyID      *string `json:"matchedPolicyId"`
	MatchedPolicyVersion *int64  `json:"matchedPolicyVersion"`
	MatchedRuleID        *string `json:"matchedRuleId"`
	Code                 *string `json:"code"`
}

// Load reads the set from samplesDir, with every case's request body. A
// case naming a missing request, a request file no case names, or an
// empty set is an error: the set and the requests cannot drift apart.
func Load(samplesDir string) ([]Case, error) {
	raw, err := os.ReadFile(filepath.Join(samplesDir, File))
	if err != nil {
		return nil, err
	}
	var doc struct {
		About []string `json:"about"`
		Cases []Case   `json:"cases"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", File, err)
	}
	if len(doc.Cases) == 0 {
		return nil, fmt.Errorf("%s has no cases", File)
	}
	var errs []error
	named := map[string]bool{}
	for i := range doc.Cases {
		c := &doc.Cases[i]
		if named[c.Request] {
			errs = append(errs, fmt.Errorf("%s: %s is listed twice", File, c.Request))
		}
		named[c.Request] = true
		if c.Expect.Decision != "allow" && c.Expect.Decision != "deny" {
			errs = append(errs, fmt.Errorf("%s: %s: expect.decision %q is not allow or deny", File, c.Request, c.Expect.Decision))
		}
		if c.Asks && (c.Expect.Decision != "deny" || deref(c.Expect.Code) != CodeCannotAsk || deref(c.Expect.MatchedRuleID) == "") {
			errs = append(errs, fmt.Errorf("%s: %s asks: expect a deny %s naming the rule that asked", File, c.Request, CodeCannotAsk))
		}
		if c.Body, err = os.ReadFile(filepath.Join(samplesDir, "requests", c.Request)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", File, err))
		} else if err := c.checkPhase(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", File, c.Request, err))
		}
		if c.Now != "" {
			if c.At, err = time.Parse(time.RFC3339, c.Now); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: now: %w", File, c.Request, err))
			}
		}
	}
	files, err := filepath.Glob(filepath.Join(samplesDir, "requests", "*.json"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if !named[filepath.Base(f)] {
			errs = append(errs, fmt.Errorf("%s has no case for %s", File, f))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return doc.Cases, nil
}

// checkPhase: a result case's request carries output and a call's does
// not, so no reader judges a result as a call (or refuses it).
func (c *Case) checkPhase() error {
	req, err := engine.DecodeRequest(c.Body)
	if err != nil {
		return err
	}
	_, hasOutput := req[engine.FieldOutput]
	switch {
	case c.Phase != "" && c.Phase != engine.PhaseResult:
		return fmt.Errorf("phase %q: want %q or none (a call)", c.Phase, engine.PhaseResult)
	case c.Result() && !hasOutput:
		return fmt.Errorf("phase result: the request carries no %s", engine.FieldOutput)
	case !c.Result() && hasOutput:
		return fmt.Errorf("the request carries %s: set \"phase\": \"result\"", engine.FieldOutput)
	case c.Result() && c.Asks:
		return errors.New("a result is never asked about: asks is for calls")
	}
	return nil
}

// Result tells whether the case judges what a tool returned.
func (c Case) Result() bool { return c.Phase == engine.PhaseResult }

// CodeCannotAsk is the code a sidecar without an API server denies an
// asked call with (approval.CodeUnavailable, written out here: this
// package reads a file every client shares and imports no Kubernetes).
const CodeCannotAsk = "APPROVAL_UNAVAILABLE"

// Offline is c as the engine decides it (toolgate eval): for a case that
// asks, decision and effect ask with code APPROVAL_REQUIRED and the same
// policy, version and rule; any other case as it is.
func (c Case) Offline() Case {
	if !c.Asks {
		return c
	}
	ask, code := string(engine.Ask), string(engine.CodeApprovalRequired)
	c.Expect.Decision, c.Expect.Effect, c.Expect.Code = ask, ask, &code
	return c
}

// Decision is the fields of a decision the set compares, whoever made it.
type Decision struct {
	Decision             string
	Effect               string
	MatchedPolicyID      string
	MatchedPolicyVersion int64
	MatchedRuleID        string
	Code                 string
}

// Of is the compared fields of an engine result (the sidecar's and the
// Go client's results embed one).
func Of(r engine.Result) Decision {
	return Decision{string(r.Decision), string(r.Effect), r.MatchedPolicyID, r.MatchedPolicyVersion, r.MatchedRuleID, string(r.Code)}
}

// Mismatch says how got differs from c's expectation, or "" when it
// conforms.
func (c Case) Mismatch(got Decision) string {
	var diffs []string
	check := func(field, want, have string) {
		if want != have {
			diffs = append(diffs, fmt.Sprintf("%s %q, want %q", field, have, want))
		}
	}
	check("decision", c.Expect.Decision, got.Decision)
	check("effect", c.Expect.Effect, got.Effect)
	check("matchedPolicyId", deref(c.Expect.MatchedPolicyID), got.MatchedPolicyID)
	check("matchedRuleId", deref(c.Expect.MatchedRuleID), got.MatchedRuleID)
	check("code", deref(c.Expect.Code), got.Code)
	var version int64
	if c.Expect.MatchedPolicyVersion != nil {
		version = *c.Expect.MatchedPolicyVersion
	}
	if version != got.MatchedPolicyVersion {
		diffs = append(diffs, fmt.Sprintf("matchedPolicyVersion %d, want %d", got.MatchedPolicyVersion, version))
	}
	if len(diffs) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: %v", c.Request, diffs)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
