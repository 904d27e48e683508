package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestPinsNeedSchemaVersionResults: pins make a bundle version 6 whatever
// else it holds, without an Identity; they encode canonically (upstreams
// sorted), decode back, and a document claiming an older version with
// pins is refused rather than read without them.
func TestPinsNeedSchemaVersionResults(t *testing.T) {
	t.Parallel()
	digest := strings.Repeat("a", 64)
	b := schemaV1Bundle()
	b.Pins = []UpstreamPins{
		{Upstream: "z-files", Pinning: "warn", Tools: map[string]string{"b": digest, "a": digest}},
		{Upstream: "a-pay", Pinning: "strict", Tools: map[string]string{"pay": digest}},
	}
	if v := b.NeededSchemaVersion(); v != SchemaVersionResults {
		t.Fatalf("version %d, want %d", v, SchemaVersionResults)
	}
	doc, _, err := Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	swapped := b
	swapped.Pins = []UpstreamPins{b.Pins[1], b.Pins[0]}
	if doc2, _, _ := Encode(swapped); !bytes.Equal(doc, doc2) {
		t.Error("the same pins in another order encode differently")
	}
	if !strings.Contains(string(doc), `"pins":[{"upstream":"a-pay","pinning":"strict","tools":{"pay":"`) {
		t.Errorf("pins encode as %s", doc)
	}
	back, err := Decode(doc)
	if err != nil || back.Identity != nil || back.PinsFor("z-files") == nil || back.PinsFor("z-files").Tools["a"] != digest || back.PinsFor("nope") != nil {
		t.Fatalf("decoded %+v, %v", back.Pins, err)
	}
	var raw map[string]any
	if err := json.Unmarshal(doc, &raw); err != nil {
		t.Fatal(err)
	}
	raw["schemaVersion"] = SchemaVersionAsk
	old, _ := json.Marshal(raw)
	if _, err := Decode(old); !errors.Is(err, ErrCorruptBundle) || !strings.Contains(err.Error(), "needs 6") {
		t.Errorf("a version 5 document with pins: %v", err)
	}
}
