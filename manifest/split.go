package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// document is one YAML or JSON document of a file: its 1-based index, the
// line it starts on and its text.
type document struct {
	index int
	line  int
	data  []byte
}

// splitError is a file that cannot be split into documents; index and line
// locate where reading stopped.
type splitError struct {
	index, line int
	msg         string
}

func (e *splitError) Error() string { return e.msg }

// splitYAML splits a YAML stream the way kubectl does: a line starting with
// "---" and followed only by blanks or a comment separates documents, and a
// separator before any content does not start a document. It also records
// where each document starts, so syntax errors can name file lines.
func splitYAML(data []byte) ([]document, error) {
	var docs []document
	var buf []byte
	lineNo, start := 0, 1
	for len(data) > 0 {
		lineNo++
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i+1], data[i+1:]
		} else {
			data = nil
		}
		if rest, ok := bytes.CutPrefix(line, []byte("---")); ok {
			if t := strings.TrimSpace(string(rest)); t != "" && t[0] != '#' {
				if len(buf) > 0 {
					docs = append(docs, document{index: len(docs) + 1, line: start, data: buf})
				}
				return docs, &splitError{index: len(docs) + 1, line: lineNo,
					msg: fmt.Sprintf("line %d: invalid YAML document separator: %q", lineNo, strings.TrimRight(string(line), "\r\n"))}
			}
			if len(buf) > 0 {
				docs = append(docs, document{index: len(docs) + 1, line: start, data: buf})
				buf = nil
			}
			start = lineNo + 1
			continue
		}
		buf = append(buf, line...)
	}
	if len(buf) > 0 {
		docs = append(docs, document{index: len(docs) + 1, line: start, data: buf})
	}
	return docs, nil
}

// splitJSON splits a stream of JSON values (one or more, whitespace between).
func splitJSON(data []byte) ([]document, error) {
	var docs []document
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			return docs, nil
		}
		if err != nil {
			offset := dec.InputOffset()
			var syn *json.SyntaxError
			switch {
			case errors.As(err, &syn):
				offset = syn.Offset
			case errors.Is(err, io.ErrUnexpectedEOF):
				offset = int64(len(data))
			}
			line := lineAt(data, offset)
			return docs, &splitError{index: len(docs) + 1, line: line,
				msg: fmt.Sprintf("line %d: invalid JSON: %v", line, err)}
		}
		end := dec.InputOffset()
		begin := end - int64(len(raw))
		docs = append(docs, document{index: len(docs) + 1, line: lineAt(data, begin), data: raw})
	}
}

// lineAt is the 1-based line of a byte offset.
func lineAt(data []byte, offset int64) int {
	offset = min(max(offset, 0), int64(len(data)))
	return bytes.Count(data[:offset], []byte("\n")) + 1
}

// looksLikeJSON is true for input whose first non-blank byte opens a JSON
// object or array; such input is read as a JSON stream when it parses as one,
// because JSON's tabs and long lines trip YAML parsers.
func looksLikeJSON(data []byte) bool {
	t := bytes.TrimLeft(data, " \t\r\n")
	return len(t) > 0 && (t[0] == '{' || t[0] == '[')
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// yamlMessage makes a YAML parser error readable on one line, with line
// numbers counted from the start of the file rather than of the document.
func yamlMessage(err error, docLine int) string {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	msg = strings.Join(strings.Fields(msg), " ")
	return yamlLine.ReplaceAllStringFunc(msg, func(m string) string {
		n, convErr := strconv.Atoi(m[len("line "):])
		if convErr != nil {
			return m
		}
		return "line " + strconv.Itoa(n+docLine-1)
	})
}
