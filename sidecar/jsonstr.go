package sidecar

import "encoding/json"

// appendJSONString quotes s as JSON. Ids, tool names and reasons are nearly
// always printable ASCII, which is copied with only quotes and backslashes
// escaped; anything else goes through encoding/json so the rare cases
// (control characters, invalid UTF-8, HTML-sensitive characters) are never
// hand-rolled.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			b, err := json.Marshal(s)
			if err != nil {
				return append(dst, `""`...)
			}
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			dst = append(dst, '\\')
		}
		dst = append(dst, s[i])
	}
	return append(dst, '"')
}

func appendNullableJSONString(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return appendJSONString(dst, s)
}
