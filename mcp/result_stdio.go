package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/mcp/callresult"
)

// The stdio guard's side of judging results: the server's answers to the
// calls it let through are judged before the agent reads them, as the HTTP
// proxy judges them (result_proxy.go), through the guard's ResultJudge.

// ResultJudge judges what a tool returned: request is the call's document
// (as Decider gets it) with its "output"; truncated says the output is
// the first --max-result-bytes of a larger answer (its text is what was
// held, and every condition on the text or structured content should
// hold). It never fails: a decision it could not get is a deny.
type ResultJudge func(ctx context.Context, request []byte, truncated bool) (res engine.Result, decision []byte)

// stdioResults are the calls let through whose answers are judged, by id.
type stdioResults struct {
	mu      sync.Mutex
	pending map[string][]byte // id as sent -> the call's document
}

// judging tells whether results are judged now: a judge is set and the
// rules served have result rules (always, when that cannot be known).
func (g *stdioGuard) judging() bool {
	return g.opts.Judge != nil && (g.opts.JudgesResults == nil || g.opts.JudgesResults())
}

// expect keeps call id's document, its answer to be judged.
func (g *stdioGuard) expect(id json.RawMessage, doc []byte) {
	g.results.mu.Lock()
	defer g.results.mu.Unlock()
	if g.results.pending == nil {
		g.results.pending = map[string][]byte{}
	}
	g.results.pending[string(bytes.TrimSpace(id))] = doc
}

// take removes and returns the document of the call id answers.
func (g *stdioGuard) take(id json.RawMessage) []byte {
	g.results.mu.Lock()
	defer g.results.mu.Unlock()
	key := string(bytes.TrimSpace(id))
	doc, ok := g.results.pending[key]
	if ok {
		delete(g.results.pending, key)
	}
	return doc
}

func (g *stdioGuard) maxResultBytes() int {
	if g.opts.MaxResultBytes > 0 {
		return g.opts.MaxResultBytes
	}
	return DefaultMaxResultBytes
}

// relay copies the server's messages to the agent a line at a time, as
// look (stdioSchemas.relay) rewrites them (nil: kept for the guard), judging the
// answers to the calls let through. While results are judged, a line is
// held up to --max-result-bytes: past it, overLine decides from what was
// held. When the agent is gone, the rest is read and dropped, so the
// server can finish.
func (g *stdioGuard) relay(ctx context.Context, from io.Reader, look func([]byte) []byte) {
	br := bufio.NewReaderSize(from, 64<<10)
	for {
		if !g.judging() {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				line = look(line)
			}
			// Results may have come to be judged while this line was
			// awaited (a sidecar's answer to the call said its bundle has
			// result rules, or a reloaded bundle gained some): the line
			// may answer a call whose result is expected to be judged.
			if len(line) > 0 && g.judging() {
				if judged := g.judgeLine(ctx, line); judged != nil {
					line = judged
				}
			}
			if len(line) > 0 && g.out.line(line) != nil {
				_, _ = io.Copy(io.Discard, br)
				return
			}
			if err != nil {
				return
			}
			continue
		}
		limit := g.maxResultBytes()
		line, err := readUpTo(br, limit)
		if len(line) > limit {
			rest := br
			if line[len(line)-1] == '\n' || err != nil {
				rest = nil // the line is whole already
			}
			if g.overLine(ctx, rest, line, limit) != nil {
				_, _ = io.Copy(io.Discard, br)
				return
			}
			if err != nil {
				return
			}
			continue
		}
		if len(line) > 0 {
			line = look(line)
		}
		if len(line) > 0 {
			if judged := g.judgeLine(ctx, line); judged != nil {
				line = judged
			}
			if g.out.line(line) != nil {
				_, _ = io.Copy(io.Discard, br)
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// readUpTo reads one line with its newline, or limit+1 bytes of a longer
// one (the rest left to read).
func readUpTo(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if err != bufio.ErrBufferFull || len(line) > limit {
			if err == bufio.ErrBufferFull {
				err = nil
			}
			return line, err
		}
	}
}

// judgeLine judges a line answering a call let through; nil when it goes
// on as it is.
func (g *stdioGuard) judgeLine(ctx context.Context, line []byte) []byte {
	g.results.mu.Lock()
	waiting := len(g.results.pending)
	g.results.mu.Unlock()
	if waiting == 0 {
		return nil // no call let through waits: nothing to parse
	}
	a, ok := readAnswer(line)
	if !ok {
		return nil
	}
	doc := g.take(a.id)
	if doc == nil {
		return nil
	}
	cr, err := callresult.Parse(a.result)
	if err != nil {
		return withheld(a.id, CodeResultUnreadable, err.Error()+"; withheld", g.modern)
	}
	res, decision := g.opts.Judge(ctx, withOutput(doc, cr.OutputDoc()), false)
	if len(decision) == 0 {
		decision, _ = res.AppendJSON(nil)
	}
	return delivered(&a, cr, &res, decision, g.modern)
}

// overLine judges a line past the limit on its first limit bytes (of
// held, what was read of it; the rest, if any, is still in br), then
// passes it on whole, or drops it and answers the call with an isError
// result saying it was larger than the limit.
func (g *stdioGuard) overLine(ctx context.Context, br *bufio.Reader, held []byte, limit int) error {
	head := held[:limit]
	id := headID(head)
	var doc []byte
	if id != nil {
		doc = g.take(id)
	}
	if doc == nil {
		// Not the answer to a call judged (or it cannot be told whose it
		// is, and then none is waited for in its name): it goes on.
		return g.out.stream(held, br)
	}
	res, _ := g.opts.Judge(ctx, withOutput(doc, callresult.AppendOutputDoc(nil, heldText(head), nil, false, len(head))), true)
	if res.Decision != engine.Deny && res.Effect != engine.EffectRedact {
		return g.out.stream(held, br)
	}
	if br != nil {
		if err := skipLine(br); err != nil && err != io.EOF {
			return err
		}
	}
	return g.out.line(withheld(id, CodeResultTooLarge, tooLargeReason(g.maxResultBytes(), &res), g.modern))
}

// withOutput is a call's document with "output" added.
func withOutput(doc, output []byte) []byte {
	out := make([]byte, 0, len(doc)+len(output)+12)
	out = append(out, doc[:len(doc)-1]...)
	out = append(out, `,"`+engine.FieldOutput+`":`...)
	out = append(out, output...)
	return append(out, '}')
}

// skipLine reads past the rest of a line.
func skipLine(br *bufio.Reader) error {
	for {
		_, err := br.ReadSlice('\n')
		if err != bufio.ErrBufferFull {
			return err
		}
	}
}

// stream writes head and the rest of its line from br (nil: head is the
// whole line) as one line, no other line written between.
func (s *stdioWriter) stream(head []byte, br *bufio.Reader) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.w.Write(head); err != nil {
		return err
	}
	for br != nil {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			if _, werr := s.w.Write(chunk); werr != nil {
				return werr
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			return nil
		}
		return err
	}
	return nil
}
