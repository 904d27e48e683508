package webhook

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/toolgate/toolgate/engine"
)

// fieldPath builds the field.Path of an engine diagnostic's location, so the
// API server's error names the field the Kubernetes way.
func fieldPath(l engine.Location) *field.Path {
	var p *field.Path
	for _, s := range l {
		switch {
		case s.Name == "" && p != nil:
			p = p.Index(s.Index)
		case p == nil:
			p = field.NewPath(s.Name)
		default:
			p = p.Child(s.Name)
		}
	}
	return p
}
