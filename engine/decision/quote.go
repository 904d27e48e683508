package decision

import "github.com/toolgate/toolgate/engine/internal/jsonvalue"

// AppendJSONString quotes s as encoding/json would, without allocating:
// what a Result's JSON is written with, for clients that write their own
// documents beside it without importing the evaluator.
func AppendJSONString(dst []byte, s string) []byte { return jsonvalue.AppendString(dst, s) }
