package crdschema

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/api/operation"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// declarativeValidationBeta is the API server's DeclarativeValidationBeta
// feature gate, on by default since Kubernetes 1.36.
const declarativeValidationBeta = true

// PrepareForCreate drops what create cannot set: status, when the CRD has
// the status subresource (apiextensions-apiserver's
// customResourceStrategy.PrepareForCreate).
func PrepareForCreate(u *unstructured.Unstructured) error {
	k, err := lookup(u.GroupVersionKind())
	if err != nil {
		return err
	}
	if k.hasStatus {
		delete(u.Object, "status")
	}
	return nil
}

// Validate returns what the API server rejects u for on create, once
// decoded and prepared (Decode, PrepareForCreate): its metadata, the OpenAPI
// schema, list-type invariants and the CRD's CEL rules, in the order and
// with the messages of apiextensions-apiserver's
// customResourceStrategy.Validate. Like the API server it skips the CEL rules
// when an earlier error means they could not run meaningfully. A namespaced
// object must name its namespace, as the API server fills it in from the
// request.
func Validate(ctx context.Context, u *unstructured.Unstructured) field.ErrorList {
	k, err := lookup(u.GroupVersionKind())
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("kind"), u.GetKind(), err.Error())}
	}
	obj := u.Object
	var errs field.ErrorList
	errs = append(errs, validateMeta(ctx, k, obj)...)
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj, k.validator)...)
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, obj, k.structural, false)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, k.structural, obj)...)
	if k.cel != nil {
		if blocked := blockingError(errs); blocked != nil {
			errs = append(errs, blocked)
		} else {
			celErrs, _ := k.cel.Validate(ctx, nil, k.structural, obj, nil, celconfig.RuntimeCELCostBudget)
			errs = append(errs, celErrs...)
		}
	}
	return errs
}

// validateMeta is the customResourceValidator's metadata check on create.
func validateMeta(ctx context.Context, k *kind, obj map[string]any) field.ErrorList {
	path := field.NewPath("metadata")
	meta := &metav1.ObjectMeta{}
	switch raw := obj["metadata"].(type) {
	case nil:
	case map[string]any:
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, meta); err != nil {
			return field.ErrorList{field.Invalid(path, raw, err.Error())}
		}
	default:
		return field.ErrorList{field.Invalid(path, raw, fmt.Sprintf("expected map[string]interface{}, got %T", raw))}
	}
	return apivalidation.ValidateObjectMetaDeclaratively(ctx, operation.Create, meta, nil, k.namespaced,
		apivalidation.NameIsDNSSubdomain, path, declarativeValidationBeta)
}

// blockingError is the API server's reason not to run CEL rules: an error
// that means the object is not what the rules were written for
// (customresource strategy.go, hasBlockingErr).
func blockingError(errs field.ErrorList) *field.Error {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong,
			field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")
		}
	}
	return nil
}

// Check is what the API server refuses a typed object for on create, when
// a client sends it as JSON: Decode, PrepareForCreate and Validate in
// turn, the errors sorted by field. An error means it could not be
// checked at all (not JSON, no CRD serves its kind, metadata that does
// not decode).
func Check(ctx context.Context, obj any) (field.ErrorList, error) {
	doc, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(doc); err != nil {
		return nil, err
	}
	if _, err := Decode(u); err != nil {
		return nil, err
	}
	if err := PrepareForCreate(u); err != nil {
		return nil, err
	}
	errs := Validate(ctx, u)
	slices.SortStableFunc(errs, func(a, b *field.Error) int { return strings.Compare(a.Field, b.Field) })
	return errs, nil
}
