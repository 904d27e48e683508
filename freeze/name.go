package freeze

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// allAgentsName is the default name of a freeze of every agent (--all). It
// is also ObjectName("all-agents"): whichever comes second finds the
// other's FrozenAgent and is refused (choose another --name), never takes it
// for its own.
const allAgentsName = "freeze-all-agents"

// ObjectName is the default FrozenAgent name for an agent id: "freeze-"
// and the id lowercased, with anything else than [a-z0-9-] made "-". When
// that changed the id or made it too long, a hash of the exact id keeps
// two ids from sharing a name ("Bot" and "bot" both freeze "bot", but by
// two objects the user can tell apart).
func ObjectName(agentID string) string {
	const prefix, max = "freeze-", 63
	var b strings.Builder
	for _, r := range strings.ToLower(agentID) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	slug := strings.Trim(b.String(), "-")
	name := prefix + slug
	if slug == agentID && len(name) <= max {
		return name
	}
	sum := sha256.Sum256([]byte(agentID))
	suffix := "-" + hex.EncodeToString(sum[:])[:8]
	if len(name) > max-len(suffix) {
		name = strings.TrimRight(name[:max-len(suffix)], "-")
	}
	return strings.TrimRight(name, "-") + suffix
}
