package manifest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/crdschema"
)

// addObject takes one toolgate object through what the API server does
// to it on `kubectl apply` before any webhook: a strict decode (duplicate and
// unknown fields are errors), the CRD's defaults and its schema and CEL
// rules, all by crdschema from the generated CRDs. It keeps, typed, only an
// object the API server would store, and counts the others in Rejected.
func (s *Set) addObject(src Source, prefix string, h header, doc []byte, errs *Errors) {
	fail := func(field, msg string) {
		*errs = append(*errs, &Error{Source: src, Kind: h.kind, Name: h.name, Field: field, Message: msg})
	}
	if s.opts.SkipOtherKinds && !isToolgateGroup(h.apiVersion) {
		if s.OtherKinds == nil {
			s.OtherKinds = map[string]int{}
		}
		s.OtherKinds[h.kind]++
		return
	}
	if !knownKind(h.kind) {
		fail(prefix+"kind", fmt.Sprintf("unknown kind %q (apiVersion %q): toolgate reads %s of %s",
			h.kind, h.apiVersion, kinds, v1alpha1.GroupVersion))
		return
	}
	if h.apiVersion != v1alpha1.GroupVersion.String() {
		fail(prefix+"apiVersion", fmt.Sprintf("unknown apiVersion %q for %s: want %s", h.apiVersion, h.kind, v1alpha1.GroupVersion))
		return
	}
	u, ok := admit(prefix, doc, clusterScoped(h.kind), fail)
	if !ok || !s.addTyped(src, prefix, u, h.kind, fail) {
		if s.Rejected == nil {
			s.Rejected = map[string]int{}
		}
		s.Rejected[h.kind]++
	}
}

// isToolgateGroup tells whether apiVersion ("group/version", or "version"
// for the core group) is of toolgate's API group, whatever its version.
func isToolgateGroup(apiVersion string) bool {
	group, _, found := strings.Cut(apiVersion, "/")
	return found && group == v1alpha1.GroupVersion.Group
}

// admit decodes and validates doc: it returns the object, defaulted, if the
// API server would store it, and reports every problem through fail.
func admit(prefix string, doc []byte, cluster bool, fail func(field, msg string)) (*unstructured.Unstructured, bool) {
	u, ok := decodeStrict(prefix, doc, fail)
	if !ok {
		return nil, false
	}
	if cluster {
		// The API server drops a cluster-scoped object's namespace before
		// validating it (rest.BeforeCreate); kubectl applies it so.
		unstructured.RemoveNestedField(u.Object, "metadata", "namespace")
	}
	unknown, err := crdschema.Decode(u)
	if me := (*crdschema.MetadataError)(nil); errors.As(err, &me) {
		fail(prefix+me.Field, me.Err.Error())
		return nil, false
	}
	if err != nil {
		fail(strings.TrimSuffix(prefix, "."), err.Error())
		return nil, false
	}
	for _, f := range unknown {
		fail(prefix+f, "unknown field")
	}
	if len(unknown) > 0 {
		return nil, false // as the API server: a strict decoding error stops there
	}
	if err := crdschema.PrepareForCreate(u); err != nil {
		fail(strings.TrimSuffix(prefix, "."), err.Error())
		return nil, false
	}
	checked := u
	if u.GetNamespace() == "" && !cluster {
		// A manifest without a namespace goes wherever it is applied: check
		// it as if applied to "default".
		checked = u.DeepCopy()
		checked.SetNamespace(metav1.NamespaceDefault)
	}
	if verrs := crdschema.Validate(context.Background(), checked); len(verrs) > 0 {
		slices.SortStableFunc(verrs, byField)
		for _, e := range verrs {
			fail(located(prefix, e), e.ErrorBody())
		}
		return nil, false
	}
	return u, true
}

// decodeStrict parses doc as the API server's strict JSON decoder does for a
// custom resource: into a map, integers kept as int64, a field given twice an
// error.
func decodeStrict(prefix string, doc []byte, fail func(field, msg string)) (*unstructured.Unstructured, bool) {
	obj := map[string]any{}
	strict, err := sigsjson.UnmarshalStrict(doc, &obj)
	if err != nil {
		fail(strings.TrimSuffix(prefix, "."), strings.TrimPrefix(err.Error(), "json: "))
		return nil, false
	}
	for _, e := range strict {
		field, msg := "", e.Error()
		if fe, ok := e.(sigsjson.FieldError); ok {
			field = prefix + fe.FieldPath()
			msg, _, _ = strings.Cut(msg, " \"")
		}
		fail(field, msg)
	}
	return &unstructured.Unstructured{Object: obj}, len(strict) == 0
}

// addTyped converts an object the schema accepted to its Go type. That
// cannot fail while the CRDs are generated from these types; if they ever
// disagree, the API server would store what toolgate's controller cannot
// read, which is a problem too.
func (s *Set) addTyped(src Source, prefix string, u *unstructured.Unstructured, kind string, fail func(field, msg string)) bool {
	data, err := u.MarshalJSON()
	if err != nil {
		fail(strings.TrimSuffix(prefix, "."), err.Error())
		return false
	}
	var target any
	var p v1alpha1.Policy
	var f v1alpha1.FrozenAgent
	var a v1alpha1.Agent
	var up v1alpha1.MCPUpstream
	var cp v1alpha1.ClusterPolicy
	var cf v1alpha1.ClusterFrozenAgent
	var pe v1alpha1.PolicyException
	switch kind {
	case kindPolicy:
		target = &p
	case kindAgent:
		target = &a
	case kindMCPUpstream:
		target = &up
	case kindClusterPolicy:
		target = &cp
	case kindClusterFrozenAgent:
		target = &cf
	case kindPolicyException:
		target = &pe
	default:
		target = &f
	}
	if err := json.Unmarshal(data, target); err != nil {
		field := ""
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field = prefix + te.Field
		}
		fail(field, "the API server accepts this, but toolgate cannot read it: "+strings.TrimPrefix(err.Error(), "json: "))
		return false
	}
	switch kind {
	case kindPolicy:
		s.Policies = append(s.Policies, Policy{Object: p, Source: src})
	case kindAgent:
		s.Agents = append(s.Agents, Agent{Object: a, Source: src})
	case kindMCPUpstream:
		s.Upstreams = append(s.Upstreams, MCPUpstream{Object: up, Source: src})
	case kindClusterPolicy:
		s.ClusterPolicies = append(s.ClusterPolicies, ClusterPolicy{Object: cp, Source: src})
	case kindClusterFrozenAgent:
		s.ClusterFrozenAgents = append(s.ClusterFrozenAgents, ClusterFrozenAgent{Object: cf, Source: src})
	case kindPolicyException:
		s.Exceptions = append(s.Exceptions, PolicyException{Object: pe, Source: src})
	default:
		s.FrozenAgents = append(s.FrozenAgents, FrozenAgent{Object: f, Source: src})
	}
	return true
}

// located is where e points, under prefix; an error about the whole object
// (the API server's "some validation rules were not checked") has no field.
func located(prefix string, e *field.Error) string {
	if noField(e) {
		return strings.TrimSuffix(prefix, ".")
	}
	return prefix + e.Field
}
