package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/toolgate/toolgate/mcp/jsonrpc"
)

// The stdio guard checks a call's argument keys against its tool's schema
// as the proxy does (argkeys.go, one check: paramSchemas). It learns the
// schemas from the answers to the agent's tools/list requests it relays,
// and, for a tool not seen yet, lists the server's tools itself: it writes
// its own tools/list to the server's stdin, with an id the agent cannot
// guess, and takes the answer out of what it relays.

// stdioSchemas are the server's tools' schemas, and the tools/list
// requests whose answers teach them.
type stdioSchemas struct {
	schemas paramSchemas
	learner learner
	// pins are the server's pinned tool definitions (pin_stdio.go).
	pins pinState
	// idPrefix makes the guard's own request ids: random per process.
	idPrefix string
	next     int

	mu sync.Mutex
	// lists are the ids of the agent's tools/list requests not answered.
	lists map[string]bool
	// own are the guard's own tools/list requests, by id, each waiting
	// for its answer; late are those no longer waited for, whose answer
	// is dropped all the same when it comes.
	own  map[string]chan []byte
	late map[string]bool
}

func newStdioSchemas() *stdioSchemas {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &stdioSchemas{idPrefix: "toolgate-schemas-" + hex.EncodeToString(b[:]) + "-", lists: map[string]bool{}, own: map[string]chan []byte{}, late: map[string]bool{}}
}

// maxPendingLists bounds the agent's tools/list ids remembered.
const maxPendingLists = 64

// agentLists notes an agent's tools/list request, whose answer teaches
// the schemas.
func (s *stdioSchemas) agentLists(id json.RawMessage) {
	if len(id) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lists) < maxPendingLists {
		s.lists[string(bytes.TrimSpace(id))] = true
	}
}

// fromServer looks at one line from the server before it is relayed:
// an answer to the agent's tools/list teaches the schemas; an answer to
// the guard's own goes to its waiter, and not to the agent (false).
func (s *stdioSchemas) fromServer(line []byte) (relay bool) {
	s.mu.Lock()
	pending := len(s.lists) > 0 || len(s.own) > 0 || len(s.late) > 0
	s.mu.Unlock()
	if !pending {
		return true
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
		Result *struct {
			Tools []json.RawMessage `json:"tools"`
		} `json:"result"`
	}
	if json.Unmarshal(line, &msg) != nil || msg.Method != nil || len(msg.ID) == 0 {
		return true
	}
	id := string(bytes.TrimSpace(msg.ID))
	s.mu.Lock()
	waiter, own := s.own[id]
	agents, late := s.lists[id], s.late[id]
	delete(s.own, id)
	delete(s.lists, id)
	delete(s.late, id)
	s.mu.Unlock()
	switch {
	case late:
		return false
	case own:
		waiter <- append([]byte(nil), line...)
		return false
	case agents && msg.Result != nil:
		for _, t := range msg.Result.Tools {
			s.schemas.learn(t)
		}
	}
	return true
}

// ensure lists the server's tools when tool's schema is not known (and
// was not looked for lately), writing the guard's own tools/list to
// toServer, with meta (the call's _meta) as the agent's would carry it.
func (s *stdioSchemas) ensure(ctx context.Context, toServer io.Writer, tool string, meta json.RawMessage) error {
	if _, seen := s.schemas.tools.Load(tool); seen && s.pins.known(tool) {
		return nil
	}
	if s.learner.missedRecently(tool) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, learnTimeout)
	defer cancel()
	cursor := ""
	for range maxLearnPages {
		next, err := s.listPage(ctx, toServer, meta, cursor)
		if err != nil {
			return err
		}
		if _, seen := s.schemas.tools.Load(tool); seen && s.pins.known(tool) {
			return nil
		}
		if next == "" {
			break
		}
		cursor = next
	}
	s.learner.miss(tool)
	return nil
}

// listPage sends one tools/list to the server and learns its answer; it
// returns the answer's nextCursor.
func (s *stdioSchemas) listPage(ctx context.Context, toServer io.Writer, meta json.RawMessage, cursor string) (string, error) {
	s.next++
	id := fmt.Sprintf("%q", fmt.Sprint(s.idPrefix, s.next))
	params := map[string]any{}
	if len(meta) > 0 {
		params["_meta"] = meta
	}
	if cursor != "" {
		params["cursor"] = cursor
	}
	req, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": jsonrpc.MethodToolsList, "params": params})
	if err != nil {
		return "", err
	}
	answer := make(chan []byte, 1)
	s.mu.Lock()
	s.own[id] = answer
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if _, unanswered := s.own[id]; unanswered && len(s.late) < maxPendingLists {
			s.late[id] = true
		}
		delete(s.own, id)
		s.mu.Unlock()
	}()
	if _, err := toServer.Write(append(req, '\n')); err != nil {
		return "", err
	}
	select {
	case line := <-answer:
		var page struct {
			Result *struct {
				Tools      []json.RawMessage `json:"tools"`
				NextCursor string            `json:"nextCursor"`
			} `json:"result"`
		}
		if err := json.Unmarshal(line, &page); err != nil || page.Result == nil {
			return "", fmt.Errorf("the server answered tools/list with %.200s", line)
		}
		for _, t := range page.Result.Tools {
			s.schemas.learn(t)
			s.pins.observe(t)
		}
		return page.Result.NextCursor, nil
	case <-ctx.Done():
		return "", errors.New("the server did not answer tools/list within " + learnTimeout.String())
	}
}
