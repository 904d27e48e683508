package engine

import (
	"github.com/toolgate/toolgate/engine/internal/jsonvalue"
	"github.com/toolgate/toolgate/engine/request"
)

// The request document is package request's; engine names it too, so that
// Evaluate's callers need engine alone (as os names io/fs's types).

// Request is one tool call, as decoded JSON (request.Request).
type Request = request.Request

// The request fields toolgate gives a meaning to (see package request).
const (
	FieldToolName        = request.FieldToolName
	FieldAgentID         = request.FieldAgentID
	FieldSessionID       = request.FieldSessionID
	FieldToolUseID       = request.FieldToolUseID
	FieldFramework       = request.FieldFramework
	FieldInput           = request.FieldInput
	FieldArgs            = request.FieldArgs
	FieldKwargs          = request.FieldKwargs
	FieldRoles           = request.FieldRoles
	FieldEnvironment     = request.FieldEnvironment
	FieldServer          = request.FieldServer
	FieldResources       = request.FieldResources
	FieldAction          = request.FieldAction
	FieldSideEffect      = request.FieldSideEffect
	FieldActorConfidence = request.FieldActorConfidence
	FieldSensitivity     = request.FieldSensitivity
	FieldContext         = request.FieldContext
	FieldTokens          = request.FieldTokens
	FieldOutput          = request.FieldOutput
	OutputText           = request.OutputText
	OutputStructured     = request.OutputStructured
	OutputIsError        = request.OutputIsError
	OutputSize           = request.OutputSize
	DefaultMaxElements   = request.DefaultMaxElements
)

// The errors request decoding wraps.
var (
	ErrBadRequest      = request.ErrBadRequest
	ErrTooManyElements = request.ErrTooManyElements
)

// DecodeRequest is request.Decode.
func DecodeRequest(doc []byte) (Request, error) { return request.Decode(doc) }

// DecodeRequestLimit is request.DecodeLimit.
func DecodeRequestLimit(doc []byte, maxElements int) (Request, error) {
	return request.DecodeLimit(doc, maxElements)
}

// DecodeObject is request.DecodeObject.
func DecodeObject(doc []byte, maxElements int) (map[string]any, error) {
	return request.DecodeObject(doc, maxElements)
}

// DecodeObjectSized is request.DecodeObjectSized.
func DecodeObjectSized(doc []byte, maxElements, fields int) (map[string]any, error) {
	return request.DecodeObjectSized(doc, maxElements, fields)
}

// DecodedString is request.DecodedString.
func DecodedString(s string) string { return request.DecodedString(s) }

// JSONKind names a decoded JSON value's kind for errors: "a string", "a
// number", "an object" ...
func JSONKind(v any) string { return jsonvalue.KindName(v) }
