package local

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/client/internal/clienttest"
	"github.com/toolgate/toolgate/engine"
)

func TestLocalWatchPicksUpAChangedFile(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/bundle.json"
	copyFile(t, clienttest.SampleBundle(t), path)
	l := newLocal(t, path)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { l.Watch(ctx, 10*time.Millisecond, nil) })
	defer wg.Wait()
	defer cancel()

	empty, _, err := engine.Encode(engine.Bundle{})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, empty)
	deadline := time.Now().Add(10 * time.Second)
	for clienttest.Evaluate(t, l, client.Request{ToolName: "Read"}).Code != engine.CodeNoPolicies {
		if time.Now().After(deadline) {
			t.Fatal("Watch did not load the changed bundle")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Evaluations running while bundles are swapped each see one whole
// bundle: an allow from the clienttest.Samples or NO_POLICIES from the empty one.
func TestLocalReloadUnderLoad(t *testing.T) {
	dir := t.TempDir()
	full, emptyPath := clienttest.SampleBundle(t), dir+"/empty.json"
	empty, _, err := engine.Encode(engine.Bundle{})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, emptyPath, empty)
	path := dir + "/bundle.json"
	copyFile(t, full, path)
	l := newLocal(t, path)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				res := clienttest.Evaluate(t, l, client.Request{ToolName: "Read", AgentID: "coder-1"})
				if !res.Allowed() && res.Code != engine.CodeNoPolicies {
					t.Errorf("mid-swap: got %+v", res)
					return
				}
			}
		})
	}
	for i := range 20 {
		src := full
		if i%2 == 0 {
			src = emptyPath
		}
		copyFile(t, src, path+".tmp")
		renameFile(t, path+".tmp", path)
		if err := l.Reload(); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
}
