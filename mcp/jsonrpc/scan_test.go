package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// scanCorpus are bodies chosen to tell a reading that differs from
// encoding/json's: field names in other cases and escapes, nulls and
// wrongly typed values at each noted place, invalid JSON of every kind,
// batches, and nesting.
var scanCorpus = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{"amount":5}}}`,
	`{"jsonrpc":"2.0","id":"a","method":"tools/list"}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"ID":7,"METHOD":"tools/call","Params":{"NAME":"pay","Arguments":[1,2],"_META":{"TOOLGATE.DEV/AGENT_ID":"x","toolgate.dev/Session_Id":"s"}}}`,
	`{"id":null,"method":null,"params":null}`,
	`{"id":{},"method":"tools/call","params":{"name":null}}`,
	`{"id":[1,{"a":2}],"method":"tools/call","params":{"name":"a","arguments":null}}`,
	`{"method":"tools/call","params":{"name":5}}`,
	`{"method":"tools/call","params":{"name":"x","_meta":"no"}}`,
	`{"method":"tools/call","params":{"name":"x","_meta":null}}`,
	`{"method":"tools/call","params":{"name":"x","_meta":{"toolgate.dev/agent_id":5}}}`,
	`{"method":"tools/call","params":{"name":"x","_meta":{"toolgate.dev/agent_id":null,"toolgate.dev/session_id":"s"}}}`,
	`{"method":"tools/call","params":{"name":"x","_meta":{"toolgate.dev/session_id":true}}}`,
	`{"method":"tools/call","params":[]}`,
	`{"method":"tools/call","params":"x"}`,
	`{"method":"tools/call"}`,
	`{"method":5}`,
	`{"method":true,"id":1}`,
	`{"method":["tools/call"]}`,
	`{"method":"tools\/call","params":{"name":"p\u0061y"}}`,
	`{"method":"tools/call","params":{"na\u006de":"pay"}}`,
	`{"method":"tools/call","params":{"name":"caf\u00e9 \ud83d\ude00"}}`,
	`{"method":"tools/call","params":{"name":"bad \ud800 surrogate"}}`,
	"{\"method\":\"tools/call\",\"params\":{\"name\":\"invalid \xff utf8\"}}",
	"{\"method\":\"tools/call\",\"params\":{\"name\":\"ok\",\"arguments\":{\"k\":\"\xc3\x28\"}}}",
	`{"method":"tools/call","params":{"name":"a","\u212ame":1}}`,
	`{"method":"tools/call","params":{"nameſ":"a"}}`,
	`{"paramſ":{"name":"x"},"method":"tools/call"}`,
	`{"method":"tools/call","params":{"name":"a","name":"b"}}`,
	`{"id":1,"method":"resources/read","params":{"uri":"file:///secrets/key"}}`,
	`{"id":1,"method":"resources/read","params":{"URI":"file:///secrets/key","_meta":{"toolgate.dev/session_id":"s"}}}`,
	`{"id":1,"method":"resources/read","params":{"uri":5}}`,
	`{"id":1,"method":"resources/read","params":{"uri":null}}`,
	`{"id":1,"method":"resources/read","params":[]}`,
	`{"id":1,"method":"resources/read"}`,
	`{"id":1,"method":"resources/subscribe","params":{"Uri":"file:///x","_meta":"no"}}`,
	`{"id":1,"method":"prompts/get","params":{"name":"admin","arguments":{"who":"x"}}}`,
	`{"id":1,"method":"prompts/get","params":{"NAME":"admin","Arguments":null,"_meta":{"toolgate.dev/agent_id":"a"}}}`,
	`{"id":1,"method":"prompts/get","params":{"name":["admin"]}}`,
	`{"id":1,"method":"prompts/get","params":{"name":"a","_meta":{"toolgate.dev/agent_id":7}}}`,
	`{"id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"admin"},"argument":{"name":"who","value":"ro"},"context":{"arguments":{"a":"b"}}}}`,
	`{"id":1,"method":"completion/complete","params":{"Ref":"x","ARGUMENT":[1],"conte\u0078t":null}}`,
	`{"id":1,"method":"completion/complete","params":null}`,
	`[{"id":1,"method":"prompts/get","params":{"name":"a"}},{"id":2,"method":"resources/read","params":{"uri":"u"}}]`,
	`{"method":"tools/call","params":{"name":"a","Name":"b"}}`,
	`{"a":1,"a":2}`,
	`{"a":[1,],"a":2}`,
	` {"method" : "tools/list" , "id" : 1 } `,
	"\t\r\n{\"id\":1}\n",
	`null`,
	`  null  `,
	`"tools/call"`,
	`5`,
	`true`,
	``,
	` `,
	`{`,
	`{"a"`,
	`{"a":`,
	`{"a":1`,
	`{"a":1,}`,
	`{"a" 1}`,
	`{1:2}`,
	`{"a":1}}`,
	`{"a":1} {"b":2}`,
	`{"a":"1`,
	`{"a":"\x"}`,
	`{"a":"\u12"}`,
	`{"a":"\u12g4"}`,
	"{\"a\":\"tab\there\"}",
	"{\"a\":\"nl\nhere\"}",
	`{"a":01}`,
	`{"a":-}`,
	`{"a":1.}`,
	`{"a":.5}`,
	`{"a":1e}`,
	`{"a":1e+}`,
	`{"a":-0.5e-7}`,
	`{"a":1E+10}`,
	`{"a":+1}`,
	`{"a":tru}`,
	`{"a":nul}`,
	`{"a":falsey}`,
	`{"a":NaN}`,
	`[]`,
	`[ ]`,
	`[{"id":1,"method":"tools/call","params":{"name":"pay"}},{"id":2,"method":"tools/list"}]`,
	`[{"id":1},null]`,
	`[1]`,
	`[[1]]`,
	`[{"method":5}]`,
	`[{"a":1,"b":{"c":1},"a":2}]`,
	`[{"id":1},]`,
	`[{"id":1}`,
	`[{"id":1}] x`,
	`{"a":{"a":{"a":{"a":[{"a":[[[{}]]]}]}}}}`,
	`{"s":"{\"name\":1,\"name\":2}","name":"x"}`,
	`{"kind":"a","\u212aind":"b"}`,
	`{"ask":1,"aſk":2}`,
	`{"a\"b":1,"a\"B":2}`,
	`{"":1,"":2}`,
	`{"":1}`,
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	`{"x":` + strings.Repeat(`{"x":`, 9998) + `1` + strings.Repeat(`}`, 9999),
	`{"x":` + strings.Repeat(`{"x":`, 9999) + `1` + strings.Repeat(`}`, 10000),
	wideObject(40, false),
	wideObject(40, true),
	wideObject(16, true),
	wideObject(17, true),
}

func wideObject(n int, dup bool) string {
	var b strings.Builder
	b.WriteString(`{"method":"tools/call","params":{"name":"w","arguments":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + strings.Repeat("x", i) + `":1`)
	}
	if dup {
		b.WriteString(`,"K":2`)
	}
	b.WriteString(`}}}`)
	return b.String()
}

// sameReading fails t when Parse reads body otherwise than the
// encoding/json reading it replaced: the error or not, and everything a
// decision reads.
func sameReading(t *testing.T, body []byte) {
	t.Helper()
	got, gotBatch, gotErr := Parse(body)
	want, wantBatch, wantErr := refParseMCPBody(body)
	short := string(body)
	if len(short) > 120 {
		short = short[:120] + "..."
	}
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("%q: error %v, encoding/json's reading: %v", short, gotErr, wantErr)
	}
	if gotErr != nil {
		// On valid JSON the only refusal besides a wrongly typed value
		// is ambiguity, and both must call it that. (On invalid JSON the
		// two may meet a duplicate or the syntax error first.)
		if json.Valid(body) && errors.Is(gotErr, errAmbiguousJSON) != errors.Is(wantErr, errAmbiguousJSON) {
			t.Fatalf("%q: error %v, encoding/json's reading: %v", short, gotErr, wantErr)
		}
		return
	}
	if gotBatch != wantBatch || len(got) != len(want) {
		t.Fatalf("%q: batch %v with %d messages, want %v with %d", short, gotBatch, len(got), wantBatch, len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !bytes.Equal(g.ID, w.ID) || g.Method != w.Method || !bytes.Equal(g.Params, w.Params) || (g.ID == nil) != (w.ID == nil) {
			t.Fatalf("%q message %d: id %q method %q params %q; want id %q method %q params %q",
				short, i, g.ID, g.Method, g.Params, w.ID, w.Method, w.Params)
		}
		if !sameRequest(g.Request, w.Request) {
			t.Fatalf("%q message %d: request params %s, want %s", short, i, describeRequest(g.Request), describeRequest(w.Request))
		}
		if (g.Call == nil) != (w.Call == nil) {
			t.Fatalf("%q message %d: call %+v, want %+v", short, i, g.Call, w.Call)
		}
		if g.Call == nil {
			continue
		}
		gc, wc := g.Call, w.Call
		if *gc.Name != *wc.Name || !bytes.Equal(gc.Arguments, wc.Arguments) || (gc.Arguments == nil) != (wc.Arguments == nil) ||
			!sameOptional(gc.Meta.AgentID, wc.Meta.AgentID) || !sameOptional(gc.Meta.SessionID, wc.Meta.SessionID) {
			t.Fatalf("%q message %d: call name %q args %q meta %v/%v; want name %q args %q meta %v/%v", short, i,
				*gc.Name, gc.Arguments, deref(gc.Meta.AgentID), deref(gc.Meta.SessionID),
				*wc.Name, wc.Arguments, deref(wc.Meta.AgentID), deref(wc.Meta.SessionID))
		}
	}
}

// sameRequest compares two readings of another decided method's params,
// field by field (a raw value absent and one present differ).
func sameRequest(a, b *RequestParams) bool {
	if a == nil || b == nil {
		return a == b
	}
	sameRaw := func(x, y json.RawMessage) bool { return bytes.Equal(x, y) && (x == nil) == (y == nil) }
	return sameOptional(a.Name, b.Name) && sameOptional(a.URI, b.URI) && sameRaw(a.Arguments, b.Arguments) &&
		sameRaw(a.Ref, b.Ref) && sameRaw(a.Argument, b.Argument) && sameRaw(a.Context, b.Context) &&
		sameOptional(a.Meta.AgentID, b.Meta.AgentID) && sameOptional(a.Meta.SessionID, b.Meta.SessionID)
}

func describeRequest(p *RequestParams) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprintf("name %s uri %s arguments %q ref %q argument %q context %q meta %s/%s", deref(p.Name), deref(p.URI),
		p.Arguments, p.Ref, p.Argument, p.Context, deref(p.Meta.AgentID), deref(p.Meta.SessionID))
}

func sameOptional(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestScannerReadsAsEncodingJSON(t *testing.T) {
	for _, body := range scanCorpus {
		sameReading(t, []byte(body))
	}
	// Every prefix of every short body: each way a body can be cut.
	for _, body := range scanCorpus {
		if len(body) > 300 {
			continue
		}
		for n := range len(body) {
			sameReading(t, []byte(body[:n]))
		}
	}
}

func FuzzScannerReadsAsEncodingJSON(f *testing.F) {
	for _, body := range scanCorpus {
		if len(body) < 1000 {
			f.Add([]byte(body))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sameReading(t, body)
	})
}

// The scanner reads a call allocating only what it returns: the
// messages, the id's copy, the call's params, and the tool's name (its
// text and the pointer to it). The encoding/json reading took 45.
func TestScannerAllocations(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"` + strings.Repeat("p", 1024) + `"}}}`)
	if _, _, err := Parse(body); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(200, func() { _, _, _ = Parse(body) }); n > 6 {
		t.Fatalf("Parse allocates %.0f times per call; want at most 6", n)
	}
}
