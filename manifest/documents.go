package manifest

import (
	"bytes"
	"encoding/json"
)

// Documents splits a YAML or JSON file (named name, for errors) into its
// non-empty documents, each as JSON, as manifests are read: duplicate keys
// are refused, and an error is located at the file, document and line.
// Other tools' files (`toolgate test`'s) are read by it too, so that every
// file toolgate reads fails alike.
func Documents(name string, data []byte) ([]json.RawMessage, error) {
	var out []json.RawMessage
	for _, d := range documents(name, data, false) {
		if d.err != nil {
			return nil, d.err
		}
		if t := bytes.TrimSpace(d.data); len(t) > 0 && string(t) != "null" {
			out = append(out, d.data)
		}
	}
	return out, nil
}
