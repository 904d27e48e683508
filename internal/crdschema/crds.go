// Package crdschema applies, outside a cluster, what kube-apiserver applies to
// toolgate's custom resources before any webhook sees them: pruning of unknown
// fields, the CRD's defaults, the OpenAPI schema, list-type invariants and the
// x-kubernetes-validations (CEL) rules. It builds all of them with
// k8s.io/apiextensions-apiserver from the CRDs controller-gen generated
// (config/crd), so no rule of the schema is written twice. Take an object
// through Decode, PrepareForCreate and Validate, in that order, as the API
// server does on create.
package crdschema

import (
	"fmt"
	"io/fs"
	"sync"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/toolgate/toolgate/config/crd"
)

// kind is what the API server builds to serve one version of one CRD.
type kind struct {
	namespaced bool
	// hasStatus: with the status subresource, create ignores status.
	hasStatus  bool
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *cel.Validator // nil when the version has no CEL rules
}

// kinds is built once per process: compiling the CEL rules is the costly part.
var kinds = sync.OnceValues(func() (map[schema.GroupVersionKind]*kind, error) {
	return load(crd.Bases)
})

func lookup(gvk schema.GroupVersionKind) (*kind, error) {
	all, err := kinds()
	if err != nil {
		return nil, err
	}
	k, ok := all[gvk]
	if !ok {
		return nil, fmt.Errorf("no CustomResourceDefinition serves %s", gvk)
	}
	return k, nil
}

// Known reports whether one of the embedded CRDs serves gvk.
func Known(gvk schema.GroupVersionKind) bool {
	_, err := lookup(gvk)
	return err == nil
}

func load(fsys fs.FS) (map[schema.GroupVersionKind]*kind, error) {
	files, err := fs.Glob(fsys, "bases/*.yaml")
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinition embedded")
	}
	out := map[schema.GroupVersionKind]*kind{}
	for _, name := range files {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		var def apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &def); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for i := range def.Spec.Versions {
			v := &def.Spec.Versions[i]
			if !v.Served {
				continue
			}
			k, err := build(&def, v)
			if err != nil {
				return nil, fmt.Errorf("%s version %s: %w", name, v.Name, err)
			}
			out[schema.GroupVersionKind{Group: def.Spec.Group, Version: v.Name, Kind: def.Spec.Names.Kind}] = k
		}
	}
	return out, nil
}

// build does for one version what the API server's CRD handler does when it
// starts serving it (apiextensions-apiserver pkg/apiserver
// customresource_handler.go, getOrCreateServingInfoFor).
func build(def *apiextensionsv1.CustomResourceDefinition, v *apiextensionsv1.CustomResourceDefinitionVersion) (*kind, error) {
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("no openAPIV3Schema")
	}
	var internal apiextensionsinternal.CustomResourceValidation
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, &internal, nil); err != nil {
		return nil, err
	}
	s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("not a structural schema: %w", err)
	}
	s = s.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(s); err != nil {
		return nil, err
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, err
	}
	return &kind{
		namespaced: def.Spec.Scope == apiextensionsv1.NamespaceScoped,
		hasStatus:  v.Subresources != nil && v.Subresources.Status != nil,
		structural: s,
		validator:  validator,
		// The per-call limit the API server compiles every rule with.
		cel: cel.NewValidator(s, true, celconfig.PerCallLimit),
	}, nil
}
