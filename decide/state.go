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
	// ServiceAccount is the one the sidecar runs as: what FrozenAgents
	// naming a ServiceAccount and the bundle's registered Agents are
	// matched with (never a request's).
	ServiceAccount string
	// binding is what every request's agent_id, roles and environment are
	// replaced with while this state is served.
	binding binding
	// suffix closes a response: `,"judgesResults":true` when the bundle
	// has result rules, then `,"bundleRevision":...,"decisionId":"<prefix>`,
	// encoded once per load instead of once per decision.
	suffix []byte
}

func newState(c *engine.Compiled, revision, origin string, at time.Time, idPrefix string, cfg *Config, serviceAccount string) *State {
	st := &State{Compiled: c, Revision: revision, Origin: origin, LoadedAt: at, ServiceAccount: serviceAccount}
	if id := c.Identity(); id != nil {
		st.binding = registeredBinding(id, serviceAccount)
	} else {
		st.binding = argumentBinding(cfg)
	}
	if c != nil && c.HasResultRules() {
		// Callers that judge results (the stdio guard through a sidecar,
		// the clients' guards) send a tool's output only when the bundle
		// has result rules to judge it with.
		st.suffix = append(st.suffix, `,"judgesResults":true`...)
	}
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
	st := newState(c, revision, origin, at, d.idPrefix, &d.cfg, d.serviceAccount)
	d.state.Store(st)
	d.broadcastState()
	return st
}

// SetServiceAccount sets the ServiceAccount the sidecar runs as, as the API
// server says it is (SelfSubjectReview), in place of --service-account,
// and re-binds the state served. Callers serialise it with Serve.
func (d *Decider) SetServiceAccount(sa string) {
	d.serviceAccount = sa
	cur := d.state.Load()
	d.state.Store(newState(cur.Compiled, cur.Revision, cur.Origin, cur.LoadedAt, d.idPrefix, &d.cfg, sa))
	d.broadcastState()
}

// Unregistered tells whether the bundle served registers the namespace's
// agents and none for this sidecar's ServiceAccount: every call is then
// denied AGENT_UNREGISTERED.
func (st *State) Unregistered() bool { return st.binding.unregistered }

// Agent is the registered Agent the state binds, nil when the sidecar's
// arguments bind (the namespace registers no agents) or none is
// registered for its ServiceAccount.
func (st *State) Agent() *engine.Agent { return st.binding.agent }

// CheckUpstream tells whether the agent may reach the MCP upstream name at
// url: always when the namespace registers no agents; otherwise only an
// upstream the bundle registers under that name at that very URL, and
// that the agent's Agent lists. The error says which is missing.
func (st *State) CheckUpstream(name, url string) error {
	id := st.Compiled.Identity()
	if id == nil {
		return nil
	}
	if st.binding.agent == nil {
		return fmt.Errorf("this sidecar's ServiceAccount %q has no Agent: an admin of the namespace must create one", st.ServiceAccount)
	}
	return id.CheckUpstream(st.binding.agent, name, url)
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
