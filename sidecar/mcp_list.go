package sidecar

import (
	"encoding/json"
	"net/http"
)

// filterList hides, in a tools/list answer, the tools the bundle denies
// this agent whatever the arguments.
func (p *mcpProxy) filterList(rt *mcpRoute, resp *http.Response, id json.RawMessage) error {
	return nil
}
