package mcp

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// letters is a struct of one field per ASCII letter, bound by
// encoding/json as a Go server binds a tool's arguments.
var letters = func() reflect.Type {
	var fields []reflect.StructField
	for c := 'a'; c <= 'z'; c++ {
		fields = append(fields, reflect.StructField{Name: strings.ToUpper(string(c)), Type: reflect.TypeFor[*int](), Tag: reflect.StructTag(`json:"` + string(c) + `"`)})
	}
	return reflect.StructOf(fields)
}()

// TestArgumentKeysFoldAsEncodingJSONBinds: for every rune of the Basic
// Multilingual Plane as a one-rune key (every rune that folds to an ASCII
// letter is there: the letters' folding orbits are K k K and S s ſ at
// most; the whole range takes ten times as long), against a schema whose properties are the 26 ASCII letters, the
// check refuses the key exactly when encoding/json binds it to a letter's
// field without being that letter (the Kelvin sign to k, the long s to s,
// upper case to lower), and passes it otherwise.
func TestArgumentKeysFoldAsEncodingJSONBinds(t *testing.T) {
	props := map[string]any{}
	for c := 'a'; c <= 'z'; c++ {
		props[string(c)] = map[string]any{"type": "integer"}
	}
	schema, err := json.Marshal(map[string]any{"type": "object", "properties": props})
	must(t, err)
	ks := newKeySchema(schema)
	refused := 0
	for r := rune(0); r <= 0xFFFF; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		key := string(r)
		doc, err := json.Marshal(map[string]int{key: 1})
		must(t, err)
		v := reflect.New(letters)
		must(t, json.Unmarshal(doc, v.Interface()))
		boundOther := false
		for i := range letters.NumField() {
			if !v.Elem().Field(i).IsNil() && letters.Field(i).Tag.Get("json") != key {
				boundOther = true
			}
		}
		err = ks.checkKeys(map[string]any{key: 1.0}, "arguments")
		if (err != nil) != boundOther {
			t.Fatalf("key %q (U+%04X): refused %v, encoding/json binds it to another letter: %v", key, r, err, boundOther)
		}
		if err != nil {
			refused++
		}
	}
	if refused != 28 { // A-Z, the Kelvin sign, the long s
		t.Fatalf("%d one-rune keys refused, want 28", refused)
	}
}

// TestArgumentKeysBelowTheTopLevel: nested properties and array items are
// checked as the top level is; keys the schema does not fold to pass; a
// tool whose schema is not known is refused a call with any key.
func TestArgumentKeysBelowTheTopLevel(t *testing.T) {
	var ps paramSchemas
	ps.learn([]byte(`{"name":"copy","inputSchema":{"type":"object","properties":{
		"from":{"type":"object","properties":{"path":{"type":"string"}}},
		"targets":{"type":"array","items":{"type":"object","properties":{"path":{"type":"string"}}}},
		"free":{"type":"object"}}}}`))
	ps.learn([]byte(`{"name":"bare","inputSchema":{"type":"object"}}`))
	decode := func(s string) any {
		var v any
		must(t, json.Unmarshal([]byte(s), &v))
		return v
	}
	for _, c := range []struct {
		tool, args, refused string
	}{
		{"copy", `{"from":{"path":"/a"},"targets":[{"path":"/b"}],"free":{"Path":"x"},"extra":1}`, ""},
		{"copy", `{"From":{"path":"/a"}}`, `"From"`},
		{"copy", `{"from":{"PATH":"/a"}}`, `"PATH" (at arguments.from)`},
		{"copy", `{"targets":[{"path":"/b"},{"Path":"/c"}]}`, `"Path" (at arguments.targets[1])`},
		{"bare", `{"Anything":1}`, ""},
		{"unlisted", `{"path":"/a"}`, `does not list tool "unlisted"`},
		{"unlisted", `{}`, ""},
		{"unlisted", `null`, ""},
	} {
		err := ps.checkArgumentKeys(c.tool, decode(c.args))
		if (err != nil) != (c.refused != "") || (err != nil && !strings.Contains(err.Error(), c.refused)) {
			t.Errorf("%s %s: %v, want refused %q", c.tool, c.args, err, c.refused)
		}
	}
}
