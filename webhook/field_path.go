package webhook

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// parseFieldPath turns an engine diagnostic's field ("spec.rules[2].conditions[0].value")
// into a field.Path, so the API server's error lists it the Kubernetes way.
func parseFieldPath(s string) *field.Path {
	var p *field.Path
	for _, part := range strings.Split(s, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if p == nil {
			p = field.NewPath(name)
		} else {
			p = p.Child(name)
		}
		for rest != "" {
			idx, after, ok := strings.Cut(rest, "]")
			if !ok {
				break
			}
			if n, err := strconv.Atoi(idx); err == nil {
				p = p.Index(n)
			} else {
				p = p.Key(idx)
			}
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return p
}
