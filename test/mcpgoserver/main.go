// Command mcpgoserver is an MCP server built with mark3labs/mcp-go, the
// most used Go MCP library, whose typed tool handlers bind a call's
// arguments with encoding/json (CallToolRequest.BindArguments): keys match
// struct fields case-insensitively, as Go servers that unmarshal their
// arguments do. The proxy's and the stdio guard's argument-key tests run
// it as a real process. It exposes read_file(path) and search(kind, scope)
// and counts each call with the values bound, so a test can show what a
// call with a key in another case ran as:
//
//	/mcp       Streamable HTTP
//	GET /stats {"calls":{"read_file /etc/motd":1,"search docs public":1}}
//
// It prints "listening on ADDR" once it serves. With -stdio it speaks MCP
// on its stdin and stdout instead, and serves only /stats on -listen
// (saying so on stderr).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

type stats struct {
	mu    sync.Mutex
	calls map[string]int
}

func (s *stats) count(call string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[call]++
}

type pathArgs struct {
	Path string `json:"path"`
}

type searchArgs struct {
	Kind  string `json:"kind"`
	Scope string `json:"scope"`
}

func newServer(st *stats) *server.MCPServer {
	s := server.NewMCPServer("toolgate-test-mcpgoserver", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("read_file", mcp.WithDescription("read a file"), mcp.WithString("path", mcp.Required())),
		mcp.NewTypedToolHandler(func(_ context.Context, _ mcp.CallToolRequest, in pathArgs) (*mcp.CallToolResult, error) {
			st.count("read_file " + in.Path)
			return mcp.NewToolResultText("contents of " + in.Path), nil
		}))
	s.AddTool(mcp.NewTool("search", mcp.WithDescription("search a scope"), mcp.WithString("kind"), mcp.WithString("scope")),
		mcp.NewTypedToolHandler(func(_ context.Context, _ mcp.CallToolRequest, in searchArgs) (*mcp.CallToolResult, error) {
			st.count("search " + in.Kind + " " + in.Scope)
			return mcp.NewToolResultText("searched " + in.Scope), nil
		}))
	return s
}

func main() {
	addr := flag.String("listen", "127.0.0.1:0", "address to serve on (loopback)")
	stdio := flag.Bool("stdio", false, "speak MCP on stdin and stdout; -listen serves only /stats")
	flag.Parse()
	st := &stats{calls: map[string]int{}}
	s := newServer(st)
	mux := http.NewServeMux()
	mux.Handle("/mcp", server.NewStreamableHTTPServer(s))
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		st.mu.Lock()
		defer st.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"calls": st.calls})
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	serve := func() error { return (&http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}).Serve(ln) }
	if *stdio {
		fmt.Fprintf(os.Stderr, "listening on %s\n", ln.Addr())
		go func() { log.Fatal(serve()) }()
		if err := server.NewStdioServer(s).Listen(context.Background(), os.Stdin, os.Stdout); err != nil {
			log.Fatal(err)
		}
		return
	}
	fmt.Fprintf(os.Stdout, "listening on %s\n", ln.Addr())
	log.Fatal(serve())
}
