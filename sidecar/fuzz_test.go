package sidecar

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzEvaluateHandler: whatever the body, the handler answers 200 with a
// decision or 400 with an error, always as JSON, never a 500 or a panic.
func FuzzEvaluateHandler(f *testing.F) {
	for _, seed := range []string{
		`{"tool_name":"Bash","agent_id":"a","input":{"command":"rm -rf /"}}`,
		`{"tool_name":"Read"}`, `{"tool_name":1}`, `[]`, `{`, ``, `null`, `{"tool_name":"t","a":1e400}`,
		"{\"tool_name\":\"\xff\"}", `{"tool_name":"t","input":{"command":"\ud800"}}`,
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	o := testOptions()
	s, err := New(o)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = s.Close(f.Context()) })
	doc, _ := encode(f, denyTools("Bash", "Write"))
	if err := s.LoadDocument(doc, false); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, explain bool) {
		url := "/v1/evaluate"
		if explain {
			url += "?explain=true"
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, url, bytes.NewReader(body)))
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("status %d, body %q is not a JSON object: %v", rec.Code, rec.Body, err)
		}
		switch rec.Code {
		case http.StatusOK:
			if d := out["decision"]; d != "allow" && d != "deny" {
				t.Fatalf("200 without a decision: %s", rec.Body)
			}
			if code, _ := out["code"].(string); code == string(CodeInternalError) {
				t.Fatalf("internal error for %q: %s", body, rec.Body)
			}
		case http.StatusBadRequest:
			if _, ok := out["error"].(string); !ok {
				t.Fatalf("400 without an error: %s", rec.Body)
			}
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
	})
}
