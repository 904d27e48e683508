// Package callresult reads an MCP tools/call result as result rules see
// it (issue 28) and writes it back redacted; the MCP proxy and the stdio
// guard judge results through it.
package callresult

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/toolgate/toolgate/engine"
)

// A tools/call result as result rules see it (issue 28): output.text is
// its text blocks' text joined with "\n", output.structured its
// structuredContent, output.isError its isError, output.size the bytes of
// the result's JSON. A redact decision's spans are over that joined text;
// Result maps them back to the blocks they came from.

// Result is a CallToolResult read for judging: its members as sent
// (what is not rewritten goes back byte for byte), its content blocks, and
// the text of each text block.
type Result struct {
	members map[string]json.RawMessage
	blocks  []json.RawMessage
	// texts are the text blocks' texts, in order; textBlock[i] is the
	// index in blocks of texts[i].
	texts     []string
	textBlock []int
	// structured is its structuredContent, nil without one.
	structured json.RawMessage
	isError    bool
	size       int
}

// ErrShape prefixes why a result could not be read for judging.
var ErrShape = errors.New("the tools/call result is not a CallToolResult the proxy can judge")

// Parse reads a tools/call result (the "result" member of the
// answer). What result rules read must be there in the shape MCP gives
// it: an object, content an array of objects (absent or null is no
// content), a text block's text a string, isError a boolean. Anything
// else is an error, and the caller withholds the result: a result the
// rules cannot read is not one they passed.
func Parse(raw json.RawMessage) (*Result, error) {
	cr := &Result{size: len(raw)}
	if err := json.Unmarshal(raw, &cr.members); err != nil || cr.members == nil {
		return nil, fmt.Errorf("%w: it is not a JSON object", ErrShape)
	}
	if c := cr.members["content"]; len(c) > 0 && string(c) != "null" {
		if err := json.Unmarshal(c, &cr.blocks); err != nil {
			return nil, fmt.Errorf("%w: content is not an array", ErrShape)
		}
	}
	for i, b := range cr.blocks {
		// Keys are read exactly as a client reads them (a map, not a
		// struct, whose fields encoding/json matches in any case: a block
		// {"text":"SECRET","Text":"fine"} must be judged on SECRET).
		var block map[string]json.RawMessage
		if err := json.Unmarshal(b, &block); err != nil || block == nil {
			return nil, fmt.Errorf("%w: content block %d is not an object", ErrShape, i)
		}
		var kind string
		if json.Unmarshal(block["type"], &kind) != nil || kind != "text" {
			continue // images, audio, resources: no text rules read
		}
		var text string
		if raw := block["text"]; len(raw) == 0 || string(raw) == "null" || json.Unmarshal(raw, &text) != nil {
			return nil, fmt.Errorf("%w: content block %d is a text block whose text is not a string", ErrShape, i)
		}
		cr.texts = append(cr.texts, text)
		cr.textBlock = append(cr.textBlock, i)
	}
	if e := cr.members["isError"]; len(e) > 0 && string(e) != "null" {
		if err := json.Unmarshal(e, &cr.isError); err != nil {
			return nil, fmt.Errorf("%w: isError is not a boolean", ErrShape)
		}
	}
	if s := cr.members["structuredContent"]; len(s) > 0 && string(s) != "null" {
		cr.structured = s
	}
	return cr, nil
}

// text is output.text: the text blocks joined with "\n".
func (cr *Result) Text() string { return strings.Join(cr.texts, "\n") }

// outputDoc is the output object as JSON, as /v1/evaluate callers send
// it: decoded into the request with engine.Request.DecodeField.
func (cr *Result) OutputDoc() []byte {
	return AppendOutputDoc(nil, cr.Text(), cr.structured, cr.isError, cr.size)
}

// AppendOutputDoc appends {"text":..., "structured":..., "isError":...,
// "size":...} (structured left out when nil).
func AppendOutputDoc(dst []byte, text string, structured json.RawMessage, isError bool, size int) []byte {
	dst = append(dst, `{"`+engine.OutputText+`":`...)
	dst = engine.AppendJSONString(dst, text)
	if structured != nil {
		dst = append(dst, `,"`+engine.OutputStructured+`":`...)
		dst = append(dst, structured...)
	}
	dst = fmt.Appendf(dst, `,"`+engine.OutputIsError+`":%t,"`+engine.OutputSize+`":%d}`, isError, size)
	return dst
}

// blockSpans maps spans over the joined text back to each text block:
// out[i] are texts[i]'s spans, in its own offsets. A span crossing a
// block boundary is cut there (the "\n" joining two blocks is in no
// block), so each block gets the part of it that is its own.
func blockSpans(texts []string, spans []engine.Redaction) [][]engine.Redaction {
	out := make([][]engine.Redaction, len(texts))
	start := 0
	for i, t := range texts {
		end := start + len(t)
		for _, s := range spans {
			from, to := max(s.Start, start), min(s.End, end)
			if from < to {
				cut := s
				cut.Start, cut.End = from-start, to-start
				out[i] = append(out[i], cut)
			}
		}
		start = end + 1 // the "\n" between blocks
	}
	return out
}

// redact rewrites the result as a redact decision delivers it: each text
// block with its spans replaced (engine.ApplyRedactions), and in
// structuredContent every string holding the original text of a span
// replaced by the same mark, so the secret does not go on in the
// structured copy of the text. Everything else is kept as sent.
func (cr *Result) Redact(spans []engine.Redaction) (json.RawMessage, error) {
	if len(spans) == 0 {
		return nil, errors.New("a redact decision without spans")
	}
	joined := cr.Text()
	for _, s := range spans {
		if s.Start < 0 || s.End > len(joined) || s.Start >= s.End {
			return nil, fmt.Errorf("a redaction [%d, %d) outside the result's %d bytes of text", s.Start, s.End, len(joined))
		}
	}
	blocks := append([]json.RawMessage(nil), cr.blocks...)
	for i, own := range blockSpans(cr.texts, spans) {
		if len(own) == 0 {
			continue
		}
		var block map[string]json.RawMessage
		if err := json.Unmarshal(blocks[cr.textBlock[i]], &block); err != nil {
			return nil, err
		}
		block["text"] = engine.AppendJSONString(nil, engine.ApplyRedactions(cr.texts[i], own))
		b, err := MarshalRaw(block)
		if err != nil {
			return nil, err
		}
		blocks[cr.textBlock[i]] = b
	}
	members := make(map[string]json.RawMessage, len(cr.members))
	for k, v := range cr.members {
		members[k] = v
	}
	if len(blocks) > 0 {
		b, err := MarshalRaw(blocks)
		if err != nil {
			return nil, err
		}
		members["content"] = b
	}
	if cr.structured != nil {
		s, err := redactStructured(cr.structured, originals(joined, spans))
		if err != nil {
			return nil, fmt.Errorf("structuredContent: %w", err)
		}
		members["structuredContent"] = s
	}
	return MarshalRaw(members)
}

// original is the text a span replaced, and its mark.
type original struct{ text, mark string }

// originals are the distinct texts the spans cover, longest first (so a
// longer secret is replaced whole before a shorter one inside it).
func originals(joined string, spans []engine.Redaction) []original {
	seen := map[string]bool{}
	var out []original
	for _, s := range spans {
		t := joined[s.Start:s.End]
		if !seen[t] {
			seen[t] = true
			out = append(out, original{t, engine.RedactionMark(s.RuleID)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].text) > len(out[j].text) })
	return out
}

// redactStructured replaces, in every string leaf of doc, each original
// text with its mark. Numbers keep their spelling (UseNumber).
func redactStructured(doc json.RawMessage, texts []original) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	changed := false
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			for _, o := range texts {
				if strings.Contains(x, o.text) {
					x, changed = strings.ReplaceAll(x, o.text, o.mark), true
				}
			}
			return x
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case map[string]any:
			for k := range x {
				x[k] = walk(x[k])
			}
		}
		return v
	}
	v = walk(v)
	if !changed {
		return doc, nil
	}
	return MarshalRaw(v)
}

// MarshalRaw encodes v as JSON without escaping <, > and & (the text a
// client reads stays as the server wrote it).
func MarshalRaw(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
