package decisionlog

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

const maxLabels = 32

var labelKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,62}$`)

// Label is one --decision-log-label: added to every line under "labels".
type Label struct{ Key, Value string }

// ParseLabels reads --decision-log-label values, KEY=VALUE each.
func ParseLabels(raw []string) ([]Label, error) {
	if len(raw) > maxLabels {
		return nil, fmt.Errorf("%d labels, more than %d", len(raw), maxLabels)
	}
	out := make([]Label, 0, len(raw))
	seen := map[string]bool{}
	for _, kv := range raw {
		k, v, ok := strings.Cut(kv, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("%q is not KEY=VALUE", kv)
		case !labelKey.MatchString(k):
			return nil, fmt.Errorf("%q: key %q must start with a letter or _ and hold only letters, digits, _ . - (at most 63)", kv, k)
		case seen[k]:
			return nil, fmt.Errorf("key %q is given twice", k)
		case len(v) > 1024:
			return nil, fmt.Errorf("%q: the value is %d bytes, more than 1024", k, len(v))
		case !utf8.ValidString(v):
			return nil, fmt.Errorf("%q: the value is not UTF-8", k)
		}
		seen[k] = true
		out = append(out, Label{k, v})
	}
	return out, nil
}
