// Package jsonvalue holds how the engine reads decoded JSON values (what
// encoding/json produces: map[string]any, []any, string, float64, bool,
// nil): as text (Stringify, JSON.stringify's compact form), as numbers
// (NumberOf, and castToNumber's reading in Cast), as empty or not, and a
// condition's own value decoded once with its forms (Scalar). It knows
// nothing of policies; the engine's operators are built on it.
package jsonvalue
