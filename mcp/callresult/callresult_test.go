package callresult

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/engine"
)

func TestParseCallResultBuildsTheOutput(t *testing.T) {
	t.Parallel()
	raw := json.RawMessage(`{"content":[{"type":"text","text":"first"},{"type":"image","data":"AAAA","mimeType":"image/png"},` +
		`{"type":"text","text":"zwölf €"}],"structuredContent":{"rows":3,"note":"x"},"isError":true}`)
	cr, err := Parse(raw)
	must(t, err)
	if got, want := cr.Text(), "first\nzwölf €"; got != want {
		t.Errorf("text = %q, want %q (the text blocks joined with newlines, the image left out)", got, want)
	}
	if !reflect.DeepEqual(cr.textBlock, []int{0, 2}) {
		t.Errorf("textBlock = %v, want [0 2]", cr.textBlock)
	}
	var out map[string]any
	must(t, json.Unmarshal(cr.OutputDoc(), &out))
	want := map[string]any{"text": "first\nzwölf €", "structured": map[string]any{"rows": 3.0, "note": "x"}, "isError": true, "size": float64(len(raw))}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("output = %v, want %v", out, want)
	}
	req := engine.Request{}
	must(t, req.DecodeField(engine.FieldOutput, cr.OutputDoc(), 1000))
	if _, ok := req[engine.FieldOutput].(map[string]any); !ok {
		t.Errorf("the output decodes into the request as an object, got %T", req[engine.FieldOutput])
	}
}

// TestParseCallResultReadsKeysAsClientsDo: keys are matched exactly, as
// a client's JSON reader matches them, never in another case (where
// encoding/json's struct decoding would take "Text" for "text").
func TestParseCallResultReadsKeysAsClientsDo(t *testing.T) {
	t.Parallel()
	cr, err := Parse(json.RawMessage(`{"content":[{"type":"text","text":"SECRET","Text":"fine","TEXT":"fine"},` +
		`{"Type":"text","text":"not a text block"}],"Content":[{"type":"text","text":"ignored"}],"IsError":true}`))
	must(t, err)
	if cr.Text() != "SECRET" || cr.isError {
		t.Errorf("text %q, isError %v; want SECRET, false", cr.Text(), cr.isError)
	}
}

func TestParseCallResultWithoutContent(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{`{}`, `{"content":null}`, `{"content":[]}`, `{"content":[],"isError":null}`} {
		cr, err := Parse(json.RawMessage(raw))
		if err != nil {
			t.Errorf("%s: %v", raw, err)
			continue
		}
		if cr.Text() != "" || cr.isError || cr.structured != nil {
			t.Errorf("%s: text %q isError %v structured %s, want nothing", raw, cr.Text(), cr.isError, cr.structured)
		}
	}
}

func TestParseCallResultRefusesMalformedResults(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		`[]`:                          "not a JSON object",
		`"text"`:                      "not a JSON object",
		`null`:                        "not a JSON object",
		`{"content":{"type":"text"}}`: "content is not an array",
		`{"content":"hello"}`:         "content is not an array",
		`{"content":[1]}`:             "content block 0 is not an object",
		`{"content":[{"type":"text","text":"a"},"b"]}`: "content block 1 is not an object",
		`{"content":[{"type":"text","text":5}]}`:       "content block 0 is a text block whose text is not a string",
		`{"content":[{"type":"text"}]}`:                "content block 0 is a text block whose text is not a string",
		`{"content":[{"type":"text","text":null}]}`:    "content block 0 is a text block whose text is not a string",
		`{"content":[],"isError":"yes"}`:               "isError is not a boolean",
	} {
		_, err := Parse(json.RawMessage(raw))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "not a CallToolResult") {
			t.Errorf("%s: error %v, want one saying %q", raw, err, want)
		}
	}
}

func span(start, end int, rule string) engine.Redaction {
	return engine.Redaction{Start: start, End: end, PolicyID: "p", RuleID: rule}
}

func TestBlockSpansMapsSpansBackToBlocks(t *testing.T) {
	t.Parallel()
	texts := []string{"abc", "", "défg"} // joined: "abc\n\ndéfg" (é is 2 bytes)
	cases := []struct {
		name  string
		spans []engine.Redaction
		want  [][]engine.Redaction
	}{
		{"inside one block", []engine.Redaction{span(1, 2, "r")}, [][]engine.Redaction{{span(1, 2, "r")}, nil, nil}},
		{"a whole block", []engine.Redaction{span(0, 3, "r")}, [][]engine.Redaction{{span(0, 3, "r")}, nil, nil}},
		{"at the start of the last block", []engine.Redaction{span(5, 8, "r")}, [][]engine.Redaction{nil, nil, {span(0, 3, "r")}}},
		{"at the end of the text", []engine.Redaction{span(8, 10, "r")}, [][]engine.Redaction{nil, nil, {span(3, 5, "r")}}},
		{"crossing every boundary is cut at each", []engine.Redaction{span(2, 7, "r")},
			[][]engine.Redaction{{span(2, 3, "r")}, nil, {span(0, 2, "r")}}},
		{"only the newline between blocks", []engine.Redaction{span(3, 4, "r")}, [][]engine.Redaction{nil, nil, nil}},
		{"two spans, two rules", []engine.Redaction{span(0, 1, "a"), span(6, 8, "b")},
			[][]engine.Redaction{{span(0, 1, "a")}, nil, {span(1, 3, "b")}}},
	}
	for _, c := range cases {
		if got := blockSpans(texts, c.spans); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

const akia = "AKIAABCDEFGHIJKLMNOP"

func TestRedactRewritesBlocksAndStructuredContent(t *testing.T) {
	t.Parallel()
	raw := json.RawMessage(`{"content":[{"type":"text","text":"key=` + akia + ` ok"},{"type":"image","data":"AAAA","mimeType":"image/png"},` +
		`{"type":"text","text":"ünïcode ` + akia + `","annotations":{"priority":1}}],` +
		`"structuredContent":{"key":"` + akia + `","n":1.50,"nested":[{"k":"prefix ` + akia + ` <b>"}],"other":"keep"},"isError":false,"_meta":{"m":1}}`)
	cr, err := Parse(raw)
	must(t, err)
	joined := cr.Text()
	first := strings.Index(joined, akia)
	second := strings.LastIndex(joined, akia)
	out, err := cr.Redact([]engine.Redaction{span(first, first+len(akia), "aws"), span(second, second+len(akia), "aws")})
	must(t, err)
	if strings.Contains(string(out), akia) {
		t.Fatalf("the key went on: %s", out)
	}
	var got struct {
		Content []map[string]any `json:"content"`
		SC      map[string]any   `json:"structuredContent"`
		Meta    map[string]any   `json:"_meta"`
		IsError bool             `json:"isError"`
	}
	must(t, json.Unmarshal(out, &got))
	if got.Content[0]["text"] != "key=[REDACTED:aws] ok" || got.Content[2]["text"] != "ünïcode [REDACTED:aws]" {
		t.Errorf("text blocks = %v", got.Content)
	}
	if got.Content[1]["data"] != "AAAA" || got.Content[2]["annotations"] == nil {
		t.Errorf("what is not text changed: %v", got.Content)
	}
	if got.SC["key"] != "[REDACTED:aws]" || got.SC["other"] != "keep" || got.Meta["m"] != 1.0 {
		t.Errorf("structuredContent = %v, _meta = %v", got.SC, got.Meta)
	}
	if k := got.SC["nested"].([]any)[0].(map[string]any)["k"]; k != "prefix [REDACTED:aws] <b>" {
		t.Errorf("nested string = %q", k)
	}
	if !strings.Contains(string(out), `"n":1.50`) || !strings.Contains(string(out), "<b>") {
		t.Errorf("numbers or HTML characters were respelled: %s", out)
	}
}

func TestRedactFailsOnSpansOutsideTheText(t *testing.T) {
	t.Parallel()
	cr, err := Parse(json.RawMessage(`{"content":[{"type":"text","text":"short"}]}`))
	must(t, err)
	for _, spans := range [][]engine.Redaction{nil, {span(2, 10, "r")}, {span(-1, 2, "r")}, {span(3, 3, "r")}} {
		if _, err := cr.Redact(spans); err == nil {
			t.Errorf("%v: no error", spans)
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
