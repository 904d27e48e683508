package request

import "fmt"

// knownFields are the request fields toolgate gives a meaning to.
var knownFields = []string{
	FieldToolName, FieldAgentID, FieldSessionID, FieldToolUseID, FieldFramework,
	FieldInput, FieldArgs, FieldKwargs, FieldRoles, FieldEnvironment,
	FieldServer, FieldResources, FieldAction, FieldSideEffect,
	FieldActorConfidence, FieldSensitivity, FieldContext, FieldTokens,
	FieldOutput,
}

// maxFoldedField bounds the names worth folding: longer ones match no
// known field, and folding stays on the stack.
const maxFoldedField = 32

// isKnownField is knownFields as a set: the common case, an exact name,
// is answered without folding, and by a switch, which hashes nothing
// (a map lookup per field was a measurable part of a decision).
// TestIsKnownFieldIsKnownFields holds it to knownFields.
func isKnownField(name string) bool {
	switch name {
	case FieldToolName, FieldAgentID, FieldSessionID, FieldToolUseID, FieldFramework,
		FieldInput, FieldArgs, FieldKwargs, FieldRoles, FieldEnvironment,
		FieldServer, FieldResources, FieldAction, FieldSideEffect,
		FieldActorConfidence, FieldSensitivity, FieldContext, FieldTokens,
		FieldOutput:
		return true
	}
	return false
}

// knownByFold maps each known field, folded, to its name.
var knownByFold = func() map[string]string {
	m := make(map[string]string, len(knownFields))
	var buf [maxFoldedField]byte
	for _, f := range knownFields {
		n, _ := foldField(f, &buf)
		m[string(buf[:n])] = f
	}
	return m
}()

// foldField writes name lower-cased without '_', '-' and '.' into buf, so
// agentId, AgentID, agent-id and agent_id fold alike; ok is false when
// name is too long to be any known field.
func foldField(name string, buf *[maxFoldedField]byte) (n int, ok bool) {
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_' || c == '-' || c == '.':
			continue
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		if n == len(buf) {
			return 0, false
		}
		buf[n] = c
		n++
	}
	return n, true
}

// checkFieldSpelling refuses a field that is a known field spelled another
// way (agentId for agent_id, toolName for tool_name): the caller meant the
// known one, and a rule on agent_id would never see it, so a frozen or
// limited agent could pass by renaming a key. Other fields are the
// caller's own: policies may read any field, so they are not refused.
func checkFieldSpelling(r Request) error {
	var buf [maxFoldedField]byte
	for name := range r {
		if isKnownField(name) {
			continue // the common case, without folding
		}
		n, ok := foldField(name, &buf)
		if !ok {
			continue
		}
		if known, found := knownByFold[string(buf[:n])]; found && known != name {
			return fmt.Errorf("%w: unknown field %q: did you mean %q? (request fields are snake_case)", ErrBadRequest, name, known)
		}
	}
	return nil
}
