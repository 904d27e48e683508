package sidecar

import (
	"fmt"
	"net"
)

// openMCP opens the MCP proxy's listener and server; nil, nil without
// --mcp-upstream. The proxy has a server of its own (mcp_serve.go) because
// its streams outlive any write timeout and because net/http's adds
// wake-ups to every call: it bounds headers and idle connections, each
// POST body by --read-timeout (mcpProxy.readBody), and its connections by
// --max-connections, like each --listen address.
func (s *Server) openMCP() (*mcpServer, net.Listener, error) {
	if s.mcp == nil {
		return nil, nil, nil
	}
	ln, err := listen(s.opts.MCP.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("--mcp-listen: %w", err)
	}
	for _, rt := range s.mcp.routes {
		credential := ""
		if rt.up.auth != nil {
			credential = rt.up.auth.current().name + " from " + rt.up.auth.file
		}
		s.log.Info("serving MCP upstream", "addr", ln.Addr().String(), "path", mcpPathPrefix+rt.up.name,
			"upstream", rt.up.url.Redacted(), "credential", credential)
	}
	if s.opts.MCP.onListen != nil {
		s.opts.MCP.onListen(ln.Addr())
	}
	srv := &mcpServer{handler: s.mcp, readHeaderTimeout: s.opts.ReadHeaderTimeout, idleTimeout: s.opts.IdleTimeout, log: s.log}
	return srv, newConnLimiter(ln, s.opts.MaxConnections, s.metrics, s.opts.MCP.Listen), nil
}
