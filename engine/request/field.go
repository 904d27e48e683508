package request

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/toolgate/toolgate/engine/internal/fastjson"
	"github.com/toolgate/toolgate/engine/internal/jsonvalue"
)

// DecodeField decodes doc, one JSON value, into r[key] exactly as
// DecodeLimit would decode it as that field of the request
// document: the same fast path and encoding/json fallback, numbers as
// float64, and the values r already holds (r itself included) counted
// against maxElements, so the limit and its error are the whole request's.
// The MCP proxy builds a call's request this way rather than writing it
// as JSON and parsing it back (FuzzDecodeField holds the two equal).
//
// One difference is left to the caller: encoding/json's nesting limit
// applies to doc alone here, one level less than inside the request
// document. The proxy's reader refuses deeper bodies first.
func (r Request) DecodeField(key string, doc []byte, maxElements int) error {
	left := math.MaxInt
	if maxElements > 0 {
		left = maxElements - countValues(map[string]any(r))
		if left < 1 {
			return tooManyElements(maxElements)
		}
	}
	v, ok, tooMany := fastjson.Value(doc, left)
	if !ok {
		if tooMany {
			return tooManyElements(maxElements)
		}
		var err error
		if v, err = decodeValueStd(doc, left); err != nil {
			if err == errTooMany {
				return tooManyElements(maxElements)
			}
			return err
		}
	}
	r[key] = v
	return nil
}

// DecodedString is s as a request document holds it once decoded, when s
// is written into it with engine.AppendJSONString: unchanged when it is UTF-8,
// each invalid byte replaced by U+FFFD as encoding/json replaces it when
// not. A request built in Go from strings of unknown origin (a header)
// uses it to hold what the same request sent as JSON would.
func DecodedString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var out string
	_ = json.Unmarshal(jsonvalue.AppendQuoted(nil, s, true), &out)
	return out
}

// CheckLimit is DecodeLimit's element limit for a request built
// in Go: the error it would give for r's document, nil when r fits.
func (r Request) CheckLimit(maxElements int) error {
	if maxElements > 0 && countValues(map[string]any(r)) > maxElements {
		return tooManyElements(maxElements)
	}
	return nil
}

var errTooMany = fmt.Errorf("too many values")

// decodeValueStd is DecodeField's encoding/json fallback, counting first
// as decodeStd does.
func decodeValueStd(doc []byte, left int) (any, error) {
	if left != math.MaxInt && fastjson.Count(doc, left) > left {
		return nil, errTooMany
	}
	return decodeJSON(doc, "value")
}

// decodeJSON is encoding/json's reading of one JSON value, and nothing
// after it; what names the value in the trailing-data error.
func decodeJSON(doc []byte, what string) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: not valid JSON: %v", ErrBadRequest, err)
	}
	if rest := bytes.TrimLeft(doc[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, fmt.Errorf("%w: trailing data after the JSON %s", ErrBadRequest, what)
	}
	return v, nil
}

// countValues counts the JSON values v holds, v itself included, as the
// decoders count them.
func countValues(v any) int {
	switch v := v.(type) {
	case map[string]any:
		n := 1
		for _, e := range v {
			n += countValues(e)
		}
		return n
	case Request:
		return countValues(map[string]any(v))
	case []any:
		n := 1
		for _, e := range v {
			n += countValues(e)
		}
		return n
	}
	return 1
}
