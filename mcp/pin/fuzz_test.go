package pin

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzCanonical: any input either fails or gives a canonical document
// that is its own canonical form (canonicalising twice changes nothing),
// names the same tool, and has the digest of the input however the input
// is re-indented.
func FuzzCanonical(f *testing.F) {
	for _, seed := range []string{
		`{"name":"read_file","description":"read a file","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}}}`,
		`{"name":"a","annotations":{"readOnlyHint":false,"title":"A"},"inputSchema":{"enum":[1,1.0,1e3,-0,"<&>"]}}`,
		`{"name":"a","description":null,"title":"x","outputSchema":{}}`,
		`{"name":"\u00e9\ud83d\ude00","inputSchema":{"b":1,"a":[{"d":null,"c":true}]}}`,
		`[]`, `null`, `{"name":1}`, `{"name":"a","inputSchema":1e400}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, tool []byte) {
		name, doc, err := Canonical(tool)
		if err != nil {
			return
		}
		name2, doc2, err := Canonical(doc)
		if err != nil || name2 != name || !bytes.Equal(doc, doc2) {
			t.Fatalf("canonical %s is not its own canonical form: %s (%v)", doc, doc2, err)
		}
		var indented bytes.Buffer
		if json.Indent(&indented, tool, "", "  ") == nil {
			_, d1, _ := Digest(tool)
			_, d2, err := Digest(indented.Bytes())
			if err != nil || d1 != d2 {
				t.Fatalf("re-indenting %s changed its digest (%v)", tool, err)
			}
		}
	})
}
