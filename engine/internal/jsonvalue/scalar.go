package jsonvalue

import "encoding/json"

// Kind is the JSON type of a condition value.
type Kind uint8

const (
	KindNone Kind = iota
	KindString
	KindNumber
	KindBool
	KindNull
	KindObject
	KindArray
)

func (k Kind) String() string {
	return [...]string{"nothing", "a string", "a number", "a boolean", "null", "an object", "an array"}[k]
}

// Scalar is a decoded condition value with its precomputed forms.
type Scalar struct {
	Kind Kind
	Str  string // the string itself, or the stringified form of other kinds
	Num  float64
	Bool bool
}

// IsScalar is true for the kinds a condition may compare with: a string, a
// number or a boolean.
func (s Scalar) IsScalar() bool {
	return s.Kind == KindString || s.Kind == KindNumber || s.Kind == KindBool
}

// ParseScalar decodes a condition value.
func ParseScalar(raw json.RawMessage) (Scalar, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return Scalar{}, err
	}
	s := Scalar{Str: Stringify(v)}
	switch x := v.(type) {
	case string:
		s.Kind = KindString
	case float64:
		s.Kind, s.Num = KindNumber, x
	case bool:
		s.Kind, s.Bool = KindBool, x
	case nil:
		s.Kind = KindNull
	case []any:
		s.Kind = KindArray
	default:
		s.Kind = KindObject
	}
	return s, nil
}

// Equal is strict, type-aware equality: numbers numerically, never a number
// equal to a string.
func (s *Scalar) Equal(v any) bool {
	switch s.Kind {
	case KindString:
		x, ok := v.(string)
		return ok && x == s.Str
	case KindNumber:
		x, ok := v.(float64)
		return ok && x == s.Num
	case KindBool:
		x, ok := v.(bool)
		return ok && x == s.Bool
	}
	return false
}
