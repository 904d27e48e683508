package cli

import (
	"github.com/toolgate/toolgate/manifest"
)

// validateReport is what `toolgate validate -o json|yaml` prints: every
// object checked and every problem and warning found, each located by
// file, document (1-based) and the document's first line.
type validateReport struct {
	Valid    bool            `json:"valid"`
	Objects  []reportObject  `json:"objects"`
	Problems []reportProblem `json:"problems"`
	Warnings []reportProblem `json:"warnings"`
	Rejected map[string]int  `json:"rejected,omitempty"`
	// OtherKinds counts, by kind, the objects of other API groups skipped.
	OtherKinds   map[string]int `json:"otherKinds,omitempty"`
	SkippedFiles []string       `json:"skippedFiles,omitempty"`
}

// reportSource locates an object or a problem; Item is the index in a
// List's items, absent for a document that is not a List.
type reportSource struct {
	File string `json:"file"`
	Doc  int    `json:"doc,omitempty"`
	Line int    `json:"line,omitempty"`
	Item *int   `json:"item,omitempty"`
}

type reportObject struct {
	reportSource
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

type reportProblem struct {
	reportSource
	Kind    string `json:"kind,omitempty"`
	Name    string `json:"name,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

func sourceOf(src manifest.Source) reportSource {
	r := reportSource{File: src.File, Doc: src.Doc, Line: src.Line}
	if src.Item >= 0 && src.Doc > 0 {
		item := src.Item
		r.Item = &item
	}
	return r
}

func problemsOf(errs manifest.Errors) []reportProblem {
	out := make([]reportProblem, 0, len(errs))
	for _, e := range errs {
		out = append(out, reportProblem{reportSource: sourceOf(e.Source), Kind: e.Kind, Name: e.Name, Field: e.Field, Message: e.Message})
	}
	return out
}

// newValidateReport lists the objects the schema accepted, kind by kind in
// input order; those it rejected are in problems and counted in Rejected.
func newValidateReport(set *manifest.Set, problems, warnings manifest.Errors) validateReport {
	r := validateReport{
		Valid:        len(problems) == 0,
		Objects:      []reportObject{},
		Problems:     problemsOf(problems),
		Warnings:     problemsOf(warnings),
		Rejected:     set.Rejected,
		OtherKinds:   set.OtherKinds,
		SkippedFiles: set.Skipped,
	}
	add := func(kind string, src manifest.Source, name, namespace string) {
		r.Objects = append(r.Objects, reportObject{reportSource: sourceOf(src), Kind: kind, Name: name, Namespace: namespace})
	}
	for _, p := range set.Policies {
		add("Policy", p.Source, p.Object.Name, p.Object.Namespace)
	}
	for _, f := range set.FrozenAgents {
		add("FrozenAgent", f.Source, f.Object.Name, f.Object.Namespace)
	}
	for _, a := range set.Agents {
		add("Agent", a.Source, a.Object.Name, a.Object.Namespace)
	}
	for _, u := range set.Upstreams {
		add("MCPUpstream", u.Source, u.Object.Name, u.Object.Namespace)
	}
	for _, p := range set.ClusterPolicies {
		add("ClusterPolicy", p.Source, p.Object.Name, "")
	}
	for _, f := range set.ClusterFrozenAgents {
		add("ClusterFrozenAgent", f.Source, f.Object.Name, "")
	}
	for _, e := range set.Exceptions {
		add("PolicyException", e.Source, e.Object.Name, e.Object.Namespace)
	}
	return r
}
