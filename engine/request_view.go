package engine

import (
	"strings"

	"github.com/toolgate/toolgate/engine/internal/fold"
)

// view is what the gateway filters read from a request, worked out once per
// evaluation and only when a rule with such a filter is reached, so
// policies without them pay nothing.
type view struct {
	ready      bool
	tool       string
	toolOK     bool // tool_name is a string
	agent      string
	agentOK    bool // agent_id is a string
	agentFold  string
	roles      []any
	rolesOK    bool // roles is an array ([] included): resolved
	server     string
	serverOK   bool
	action     string
	sideEffect string
	sideOK     bool
	env        string
	envOK      bool
	confidence string
	tags       []any
	context    map[string]any
	resources  []resource // reused across evaluations
	keysReady  bool
	agentKey   UsageKey
	sessionKey UsageKey
}

// resource is one valid entry of the request's resources.
type resource struct {
	typ, name string
	obj       map[string]any
	tags      []any
}

func (r *resource) ref() ResourceRef { return ResourceRef{Type: r.typ, Name: r.name} }

// clear forgets the request, keeping the resources buffer.
func (v *view) clear() {
	res := v.resources[:0]
	clear(v.resources[:cap(v.resources)])
	*v = view{resources: res}
}

// load reads req. Each reading is what SPEC and README state: a field of
// the wrong type counts as absent.
func (v *view) load(req Request) {
	v.ready = true
	v.tool, v.toolOK = req[FieldToolName].(string)
	v.agent, v.agentOK = req[FieldAgentID].(string)
	if v.agentOK {
		v.agentFold = fold.Key(v.agent)
	}
	v.roles, v.rolesOK = req[FieldRoles].([]any)
	if s, ok := req[FieldServer].(string); ok {
		v.server, v.serverOK = s, true
	} else if _, present := req[FieldServer]; !present {
		v.server, v.serverOK = serverOf(v.tool)
	}
	v.action = "call"
	if a, ok := req[FieldAction].(string); ok {
		v.action = a
	}
	v.sideEffect, v.sideOK = req[FieldSideEffect].(string)
	v.env, v.envOK = req[FieldEnvironment].(string)
	v.confidence = "unknown"
	if c, ok := req[FieldActorConfidence].(string); ok {
		v.confidence = c
	}
	v.tags, _ = req[FieldSensitivity].([]any)
	v.context, _ = req[FieldContext].(map[string]any)
	list, _ := req[FieldResources].([]any)
	for _, item := range list {
		obj, ok := item.(map[string]any)
		if !ok {
			continue
		}
		typ, okT := obj["type"].(string)
		name, okN := obj["name"].(string)
		if !okT || !okN {
			continue
		}
		tags, _ := obj["sensitivity"].([]any)
		v.resources = append(v.resources, resource{typ: typ, name: name, obj: obj, tags: tags})
	}
}

// serverOf derives an MCP tool's server from its name, mcp__<server>__<tool>:
// the text between the prefix and the next "__", when both it and the tool
// are non-empty.
func serverOf(tool string) (string, bool) {
	rest, ok := strings.CutPrefix(tool, "mcp__")
	if !ok {
		return "", false
	}
	server, name, ok := strings.Cut(rest, "__")
	if !ok || server == "" || name == "" {
		return "", false
	}
	return server, true
}

// usageKey is the key a limit counts under, as the recorder keys it.
func (s *scratch) usageKey(session bool) UsageKey {
	v := &s.view
	if !v.keysReady {
		v.agentKey, v.sessionKey = UsageKeys(s.req)
		v.keysReady = true
	}
	if session {
		return v.sessionKey
	}
	return v.agentKey
}
