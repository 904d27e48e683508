package mcp

import (
	"strings"
	"testing"
)

func TestReadAnswerTellsResultsFromTheRest(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]bool{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`:                                  true,
		` {"jsonrpc":"2.0","id":"a","result":{}} `:                                          true,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"result"}}`:                    false,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"result":1}}`:         false,
		`{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{},"result":1}`: false,
		`{"jsonrpc":"2.0","result":{}}`:                                                     false,
		`not json "result"`:                                                                 false,
	} {
		if _, ok := readAnswer([]byte(msg)); ok != want {
			t.Errorf("%s: %v, want %v", msg, ok, want)
		}
	}
}

func TestEachMessageRewritesABatchOnlyWhenChanged(t *testing.T) {
	t.Parallel()
	batch := []byte(`[{"id":1},{"id":2}]`)
	same := eachMessage(batch, func(m []byte) []byte { return m })
	if string(same) != string(batch) {
		t.Errorf("unchanged batch rewritten: %s", same)
	}
	out := eachMessage(batch, func(m []byte) []byte {
		if strings.Contains(string(m), "2") {
			return []byte(`{"id":2,"x":true}`)
		}
		return m
	})
	if string(out) != `[{"id":1},{"id":2,"x":true}]` {
		t.Errorf("batch = %s", out)
	}
}
