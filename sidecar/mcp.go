package sidecar

import (
	"fmt"
	"net"

	"github.com/toolgate/toolgate/internal/httploop"
)

// openMCP opens the MCP proxy's listener and server; nil, nil without
// --mcp-upstream. The proxy has a server of its own (httploop.Server)
// because its streams outlive any write timeout and because net/http's adds
// wake-ups to every call: it bounds headers and idle connections, each
// POST body by --read-timeout (the proxy's readBody), and its connections
// by --max-connections, like each --listen address.
func (s *Server) openMCP() (*httploop.Server, net.Listener, error) {
	if s.mcp == nil {
		return nil, nil, nil
	}
	ln, err := httploop.Listen(s.opts.MCP.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("--mcp-listen: %w", err)
	}
	s.mcp.LogRoutes(ln.Addr().String())
	if s.opts.MCP.OnListen != nil {
		s.opts.MCP.OnListen(ln.Addr())
	}
	srv := &httploop.Server{Handler: s.mcp, ReadHeaderTimeout: s.opts.ReadHeaderTimeout, IdleTimeout: s.opts.IdleTimeout, Log: s.log}
	return srv, httploop.LimitConns(ln, s.opts.MaxConnections, s.opts.MaxMCPConnections, s.metrics.conns(), s.opts.MCP.Listen), nil
}
