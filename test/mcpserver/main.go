// Command mcpserver is the MCP server the MCP proxy's end-to-end tests and
// `make measure-mcp` run as a real process: built with the official Go SDK,
// it exposes pay(amount), read_file(path), delete_file(path),
// echo(texts) (its texts as text blocks), query(rows, payload) (structured
// content) and stream(note), the resources file:///public/readme and
// file:///secrets/key (subscribable), the prompts greet(who) and
// admin(who), and completions of their arguments, and counts what reaches
// it, so a test can prove a denied call never did: calls by tool name, the
// rest as "METHOD NAME" ("resources/read file:///secrets/key",
// "prompts/get admin", "completion/complete greet who").
//
//	/mcp           the stateful endpoint (2025-11-25: sessions, GET streams)
//	/mcp-stateless the stateless one (2026-07-28, and 2025-11-25 without sessions)
//	/mcp-json      stateless, answering each POST with a JSON body, not an event stream
//	GET /stats     {"calls":{"pay":1,...},"authorization":["Bearer ..."],"traceparent":["00-..."]}
//	POST /release  lets every stream call waiting return
//	POST /tools?name=N&description=D  adds tool N (or replaces its
//	               definition) with description D, which the SDK tells
//	               every session with notifications/tools/list_changed:
//	               a server changing a tool after it was reviewed
//
// It prints "listening on ADDR" once it serves. With -stdio it speaks MCP
// on its stdin and stdout instead, as a server an agent starts itself, and
// serves only /stats and /release on -listen (saying so on stderr); it
// exits when its stdin ends. With -announce it writes "called TOOL
// UNIXNANO" on stdout as each tool call reaches its handler, so a
// measurement (make measure-approvals) learns when the upstream received a
// call without polling /stats.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type stats struct {
	mu    sync.Mutex
	calls map[string]int
	auth  []string
	// traceparents are the distinct traceparent headers sent, so a test
	// can see the trace the proxy continued upstream.
	traceparents []string
	// release is closed by POST /release.
	release chan struct{}
	// announce, when set, is told of each call as it arrives (-announce).
	announce io.Writer
}

func (s *stats) count(tool string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[tool]++
	if s.announce != nil {
		fmt.Fprintf(s.announce, "called %s %d\n", tool, time.Now().UnixNano())
	}
}

func (s *stats) recordAuth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if a := r.Header.Get("Authorization"); a != "" && !slices.Contains(s.auth, a) {
			s.auth = append(s.auth, a)
		}
		if tp := r.Header.Get("Traceparent"); tp != "" && !slices.Contains(s.traceparents, tp) {
			s.traceparents = append(s.traceparents, tp)
		}
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

type payIn struct {
	Amount float64 `json:"amount" jsonschema:"the amount to pay"`
}

type pathIn struct {
	Path string `json:"path" jsonschema:"a file path"`
}

type routeIn struct {
	Region string `json:"region" jsonschema:"where the request is routed"`
	Body   string `json:"body" jsonschema:"what is sent"`
}

type echoIn struct {
	Texts []string `json:"texts" jsonschema:"the text blocks to return, one block each"`
}

type queryIn struct {
	Rows    int    `json:"rows" jsonschema:"the rows count the result reports"`
	Payload string `json:"payload" jsonschema:"a string the result carries, JSON or not"`
}

// queryOut is query's structured content.
type queryOut struct {
	Rows    int    `json:"rows"`
	Payload string `json:"payload"`
}

type noteIn struct {
	Note string `json:"note" jsonschema:"a note echoed back"`
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func newServer(st *stats) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "toolgate-test-mcpserver", Version: "1.0.0"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			st.count("resources/subscribe " + req.Params.URI)
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			st.count("completion/complete " + req.Params.Ref.Name + " " + req.Params.Argument.Name)
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{req.Params.Argument.Value + "-completed"}}}, nil
		},
	})
	for _, uri := range []string{"file:///public/readme", "file:///secrets/key"} {
		srv.AddResource(&mcp.Resource{URI: uri, Name: uri, MIMEType: "text/plain"},
			func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				st.count("resources/read " + req.Params.URI)
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "contents of " + req.Params.URI}}}, nil
			})
	}
	for _, name := range []string{"greet", "admin"} {
		srv.AddPrompt(&mcp.Prompt{Name: name, Arguments: []*mcp.PromptArgument{{Name: "who"}}},
			func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				st.count("prompts/get " + req.Params.Name)
				return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: req.Params.Name + " " + req.Params.Arguments["who"]}}}}, nil
			})
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "pay", Description: "pay an amount"},
		func(_ context.Context, _ *mcp.CallToolRequest, in payIn) (*mcp.CallToolResult, any, error) {
			st.count("pay")
			return text(fmt.Sprintf("paid %g", in.Amount)), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "read_file", Description: "read a file"},
		func(_ context.Context, _ *mcp.CallToolRequest, in pathIn) (*mcp.CallToolResult, any, error) {
			st.count("read_file")
			return text("contents of " + in.Path), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "delete_file", Description: "delete a file"},
		func(_ context.Context, _ *mcp.CallToolRequest, in pathIn) (*mcp.CallToolResult, any, error) {
			st.count("delete_file")
			return text("deleted " + in.Path), nil, nil
		})
	// route mirrors its region argument in the Mcp-Param-Region header
	// (SEP-2243, x-mcp-header), which the SDK's server checks against the
	// body.
	mcp.AddTool(srv, &mcp.Tool{Name: "route", Description: "send a body to a region",
		InputSchema: map[string]any{"type": "object", "required": []string{"region"}, "properties": map[string]any{
			"region": map[string]any{"type": "string", "x-mcp-header": "Region"},
			"body":   map[string]any{"type": "string"},
		}}},
		func(_ context.Context, _ *mcp.CallToolRequest, in routeIn) (*mcp.CallToolResult, any, error) {
			st.count("route")
			return text("routed to " + in.Region), nil, nil
		})
	// echo returns the texts it is given, one text block each: what a
	// tool that reads files or pages returns, secrets included.
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "return the given texts as text blocks"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			st.count("echo")
			res := &mcp.CallToolResult{}
			for _, t := range in.Texts {
				res.Content = append(res.Content, &mcp.TextContent{Text: t})
			}
			return res, nil, nil
		})
	// query returns structured content ({rows, payload}), and its JSON as
	// the text block the SDK adds.
	mcp.AddTool(srv, &mcp.Tool{Name: "query", Description: "return rows and payload as structured content"},
		func(_ context.Context, _ *mcp.CallToolRequest, in queryIn) (*mcp.CallToolResult, queryOut, error) {
			st.count("query")
			return nil, queryOut(in), nil
		})
	// stream sends a progress notification at once, then waits for POST
	// /release: a client that sees the notification before releasing has
	// proof the response stream was not buffered.
	mcp.AddTool(srv, &mcp.Tool{Name: "stream", Description: "notify progress, then wait for /release"},
		func(ctx context.Context, req *mcp.CallToolRequest, in noteIn) (*mcp.CallToolResult, any, error) {
			st.count("stream")
			if tok := req.Params.GetProgressToken(); tok != nil {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Message: "started " + in.Note}); err != nil {
					return nil, nil, err
				}
			}
			select {
			case <-st.release:
			case <-time.After(30 * time.Second):
				return nil, nil, fmt.Errorf("not released within 30s")
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return text("streamed " + in.Note), nil, nil
		})
	return srv
}

func main() {
	addr := flag.String("listen", "127.0.0.1:0", "address to serve on (loopback)")
	stdio := flag.Bool("stdio", false, "speak MCP on stdin and stdout; -listen serves only /stats and /release")
	announce := flag.Bool("announce", false, `write "called TOOL UNIXNANO" on stdout as each call arrives (not with -stdio, whose stdout is MCP)`)
	flag.Parse()
	st := &stats{calls: map[string]int{}, release: make(chan struct{})}
	if *announce {
		if *stdio {
			log.Fatal("-announce writes on stdout, which -stdio speaks MCP on: use one of them")
		}
		st.announce = os.Stdout
	}
	srv := newServer(st)
	getServer := func(*http.Request) *mcp.Server { return srv }
	var releaseOnce sync.Once
	mux := http.NewServeMux()
	// The SDK speaks 2026-07-28 only stateless, and keeps sessions (GET
	// streams, Mcp-Session-Id) only stateful: one endpoint for each.
	mux.Handle("/mcp", st.recordAuth(mcp.NewStreamableHTTPHandler(getServer, nil)))
	mux.Handle("/mcp-stateless", st.recordAuth(mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Stateless: true})))
	// The same, answering each POST with a JSON body instead of an event
	// stream: the other way an answer reaches the proxy.
	mux.Handle("/mcp-json", st.recordAuth(mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})))
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		st.mu.Lock()
		defer st.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"calls": st.calls, "authorization": st.auth, "traceparent": st.traceparents})
	})
	mux.HandleFunc("POST /release", func(w http.ResponseWriter, _ *http.Request) {
		releaseOnce.Do(func() { close(st.release) })
	})
	mux.HandleFunc("POST /tools", func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Query().Get("name")
		if name == "" {
			http.Error(w, "name= is required", http.StatusBadRequest)
			return
		}
		mcp.AddTool(srv, &mcp.Tool{Name: name, Description: r.URL.Query().Get("description")},
			func(_ context.Context, _ *mcp.CallToolRequest, in pathIn) (*mcp.CallToolResult, any, error) {
				st.count(name)
				return text(name + " " + in.Path), nil, nil
			})
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	serve := func() error { return (&http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}).Serve(ln) }
	if *stdio {
		fmt.Fprintf(os.Stderr, "listening on %s\n", ln.Addr())
		go func() { log.Fatal(serve()) }()
		if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil && !errors.Is(err, io.EOF) {
			log.Fatal(err)
		}
		return
	}
	fmt.Fprintf(os.Stdout, "listening on %s\n", ln.Addr())
	log.Fatal(serve())
}
