package sidecar

import (
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"github.com/toolgate/toolgate/internal/mcptest"
)

// TestMCPProxyRefusesUpgrades: the proxy upgrades no connection, on its
// TCP listener or on the Unix socket, to an http or an https upstream. A
// request that asks for an upgrade (an Upgrade header, or upgrade in
// Connection) is 400 and never forwarded, and an upstream that answers
// 101 Switching Protocols gets the agent a 502. Through an upgraded
// connection the agent would talk to the upstream unread: this upstream
// serves MCP over WebSocket too (golang.org/x/net/websocket), as servers
// with a WebSocket transport do, and runs any tools/call sent on it.
func TestMCPProxyRefusesUpgrades(t *testing.T) {
	for _, listener := range []string{"tcp", "socket"} {
		for _, scheme := range []string{"http", "https"} {
			t.Run(listener+"/"+scheme, func(t *testing.T) {
				up := newCallCounter()
				var upgrades atomic.Int32
				srv := httptest.NewUnstartedServer(webSocketMCP(up, &upgrades))
				roots := x509.NewCertPool()
				if scheme == "https" {
					srv.StartTLS()
					roots.AddCert(srv.Certificate())
				} else {
					srv.Start()
				}
				t.Cleanup(srv.Close)
				sock := filepath.Join(t.TempDir(), "toolgate.sock")
				rig := startMCPRig(t, srv.URL+"/mcp", mcptest.Bundle(), func(o *Options) {
					o.MCP.UpstreamRoots = roots
					if listener == "socket" {
						o.Listen = []string{"127.0.0.1:0", "unix://" + sock}
					}
				})
				dial := tcpDial(t, rig.proxy)
				if listener == "socket" {
					dial = func() (net.Conn, error) { return net.Dial("unix", sock) }
				}

				ws := []string{"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13", "Origin: http://agent"}
				for _, c := range []struct {
					name    string
					headers []string
				}{
					{"a WebSocket handshake", append([]string{"Connection: Upgrade", "Upgrade: websocket"}, ws...)},
					{"upgrade among Connection's tokens", append([]string{"Connection: keep-alive, upgrade", "Upgrade: websocket"}, ws...)},
					{"h2c", []string{"Connection: Upgrade, HTTP2-Settings", "Upgrade: h2c", "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA"}},
					{"Upgrade without Connection", []string{"Upgrade: websocket"}},
					{"Connection: upgrade without Upgrade", []string{"Connection: upgrade"}},
				} {
					resp, body := exchange(t, dial, agentRequest("GET", "/mcp/pay", c.headers, ""))
					refusedByToolgate(t, c.name, resp, body, http.StatusBadRequest, "upgrade")
				}

				// The agent's own WebSocket client: it must not get a
				// connection on which it speaks to the upstream unread.
				conn, err := dial()
				must(t, err)
				defer conn.Close()
				must(t, conn.SetDeadline(time.Now().Add(20*time.Second)))
				cfg, err := websocket.NewConfig("ws://sidecar/mcp/pay", "http://agent")
				must(t, err)
				if tunnel, err := websocket.NewClient(cfg, conn); err == nil {
					_ = websocket.Message.Send(tunnel, toolCall("delete_file", "/through-the-tunnel"))
					var answer string
					_ = websocket.Message.Receive(tunnel, &answer)
					t.Errorf("the proxy upgraded the agent's connection: a tools/call of delete_file sent on it was answered %q", answer)
				}

				// An upstream that switches protocols unasked, in answer to
				// an allowed call: 502, and the call logged once.
				resp, body := exchange(t, dial, agentRequest("POST", "/mcp/pay", []string{"Content-Type: application/json"}, toolCall("switch", "/switched")))
				refusedByToolgate(t, "an upstream answering 101", resp, body, http.StatusBadGateway, "101")
				rig.loggedOnce("switch", "/switched", []string{"/through-the-tunnel"})

				if n := upgrades.Load(); n != 0 {
					t.Errorf("the upstream was asked to upgrade %d times", n)
				}
				if ran := up.ran(); len(ran) != 1 || ran["switch"] != 1 {
					t.Errorf("the upstream ran %v, want only the allowed switch", ran)
				}
			})
		}
	}
}

// webSocketMCP is an MCP upstream that runs every tools/call it is sent,
// over HTTP or over WebSocket once a request asks to upgrade (counted in
// upgrades); a call of the tool "switch" it answers with 101 Switching
// Protocols though nothing asked for it.
func webSocketMCP(up *callCounter, upgrades *atomic.Int32) http.Handler {
	ws := websocket.Server{
		Handshake: func(*websocket.Config, *http.Request) error { return nil },
		Handler: func(c *websocket.Conn) {
			for {
				var msg []byte
				if websocket.Message.Receive(c, &msg) != nil || websocket.Message.Send(c, string(up.call(msg))) != nil {
					return
				}
			}
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up.saw(r.Method)
		if r.Header.Get("Upgrade") != "" {
			upgrades.Add(1)
			ws.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		if !strings.Contains(string(body), `"name":"switch"`) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(up.call(body))
			return
		}
		up.call(body)
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
	})
}
