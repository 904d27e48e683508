package decide

import (
	"fmt"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/engine"
)

// State is what one decision reads with a single atomic load: the compiled
// bundle with its freezes, and where it came from.
type State struct {
	Compiled *engine.Compiled // nil: no bundle, deny NO_POLICIES
	Revision string
	Origin   string
	LoadedAt time.Time
	// suffix closes a response: `,"bundleRevision":...,"decisionId":"<prefix>`,
	// encoded once per load instead of once per decision.
	suffix []byte
}

func newState(c *engine.Compiled, revision, origin string, at time.Time, idPrefix string) *State {
	st := &State{Compiled: c, Revision: revision, Origin: origin, LoadedAt: at}
	st.suffix = append(st.suffix, `,"bundleRevision":`...)
	if revision == "" {
		st.suffix = append(st.suffix, "null"...)
	} else {
		st.suffix = engine.AppendJSONString(st.suffix, revision)
	}
	st.suffix = append(st.suffix, `,"decisionId":"`...)
	st.suffix = append(st.suffix, idPrefix...)
	return st
}

// State is the bundle served now.
func (d *Decider) State() *State { return d.state.Load() }

// Serve swaps in what decisions read from now on: c (nil: no bundle, every
// decision deny NO_POLICIES), its revision, where it came from and when it
// was loaded. Callers serialise their swaps; decisions never wait on them.
func (d *Decider) Serve(c *engine.Compiled, revision, origin string, at time.Time) *State {
	st := newState(c, revision, origin, at, d.idPrefix)
	d.state.Store(st)
	return st
}

// Ready reports whether a bundle is served.
func (d *Decider) Ready() bool { return d.state.Load().Compiled != nil }

// NextID is a new decision id: unique across restarts and replicas (a
// per-process random prefix, encoded in every answer, and a counter)
// without a random read per decision.
func (d *Decider) NextID() uint64 { return d.nextID.Add(1) }

// AppendAnswer encodes res as the /v1/evaluate answer, closed with the
// bundle revision of st and decision id, into dst's storage, with a
// trailing newline.
func (d *Decider) AppendAnswer(dst []byte, res *engine.Result, st *State, id uint64) []byte {
	out, err := res.AppendJSON(dst[:0])
	if err != nil {
		panic(fmt.Sprintf("encoding the result: %v", err))
	}
	out = append(out[:len(out)-1], st.suffix...)
	out = strconv.AppendUint(out, id, 36)
	return append(out, "\"}\n"...)
}
