package crdschema

import (
	"encoding/json"
	"maps"
	"slices"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Decode does to a freshly parsed object what the API server's decoder does
// under strict field validation (kubectl's default): it reads metadata as
// ObjectMeta, removes the fields the schema does not know and returns their
// paths (strict validation rejects the object for them), drops nulls the
// schema does not allow, then applies the CRD's defaults. The steps and their
// order are those of apiextensions-apiserver's unstructuredSchemaCoercer
// followed by its unstructuredDefaulter. An error (a *MetadataError when
// metadata is not ObjectMeta) means the API server could not decode the
// object at all.
func Decode(u *unstructured.Unstructured) (unknownFields []string, err error) {
	k, err := lookup(u.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	obj := u.Object
	meta, foundMeta, unknownMeta, err := schemaobjectmeta.GetObjectMetaWithOptions(obj,
		schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		return nil, &MetadataError{Field: badMetadataField(obj["metadata"]), Err: err}
	}
	unknownFields = append(unknownFields, unknownMeta...)
	unknownFields = append(unknownFields, structuralpruning.PruneWithOptions(obj, k.structural, true,
		structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, k.structural)
	metaErr, unknownEmbedded := schemaobjectmeta.CoerceWithOptions(nil, obj, k.structural, false,
		schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: true})
	if metaErr != nil {
		return nil, metaErr
	}
	unknownFields = append(unknownFields, unknownEmbedded...)
	if foundMeta {
		if err := schemaobjectmeta.SetObjectMeta(obj, meta); err != nil {
			return nil, err
		}
	}
	structuraldefaulting.Default(obj, k.structural)
	return unknownFields, nil
}

// MetadataError is why the API server cannot decode an object's metadata
// as ObjectMeta: its message, and the field it is about.
type MetadataError struct {
	Field string // "metadata" or "metadata.<key>"
	Err   error
}

func (e *MetadataError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *MetadataError) Unwrap() error { return e.Err }

// badMetadataField finds which key of metadata does not decode: the decoder's
// error names it only as a Go struct field.
func badMetadataField(metadata any) string {
	m, ok := metadata.(map[string]any)
	if !ok {
		return "metadata"
	}
	for _, key := range slices.Sorted(maps.Keys(m)) {
		one, err := json.Marshal(map[string]any{key: m[key]})
		if err != nil || json.Unmarshal(one, &metav1.ObjectMeta{}) != nil {
			return "metadata." + key
		}
	}
	return "metadata"
}

// Default applies the CRD's defaults (spec.defaultEffect: allow, say) to u,
// as the API server does whenever it decodes one.
func Default(u *unstructured.Unstructured) error {
	k, err := lookup(u.GroupVersionKind())
	if err != nil {
		return err
	}
	structuraldefaulting.Default(u.Object, k.structural)
	return nil
}
