package rego

import (
	_ "embed"
	"strings"

	"github.com/toolgate/toolgate/engine/detect"
)

// DetectRego is the Rego of the detect operator (detect.rego): _detect(s,
// names) holds when one of the named detectors finds something in s, as
// engine/detect's Scanner does. An export carries it when a rule uses
// detect, with DetectData in its data.
//
//go:embed detect.rego
var DetectRego string

// DetectData is what DetectRego reads under data.toolgate: each
// detector's pattern (detect.Pattern) and iban's countries.
func DetectData() map[string]any {
	patterns, countries := detectData()
	return map[string]any{"detectors": patterns, "ibanCountries": countries}
}

func detectData() (map[string]string, string) {
	patterns := map[string]string{}
	for _, name := range detect.Names() {
		d, _ := detect.Lookup(name)
		patterns[name] = detect.Pattern(d)
	}
	return patterns, strings.Join(detect.IBANCountries(), " ")
}
