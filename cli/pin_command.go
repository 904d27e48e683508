package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/mcp"
	"github.com/toolgate/toolgate/mcp/pin"
)

// MCPPinOptions are the flags of `toolgate mcp pin`.
type MCPPinOptions struct {
	// Stdio starts the server (the command after --) instead of
	// connecting to a URL.
	Stdio   bool
	Timeout time.Duration
	Output  outputFormat
	// HeaderFile holds one header line sent with every request to a URL
	// (a credential), as the sidecar's --mcp-upstream-auth.
	HeaderFile string
}

func newMCPPinCommand() *cobra.Command {
	o := &MCPPinOptions{}
	cmd := &cobra.Command{
		Use:   "pin [--header-file FILE] URL | pin --stdio -- COMMAND [ARG...]",
		Short: "Print the pinnedTools of a live MCP server, to paste into its MCPUpstream",
		Long: "pin connects to a live MCP server with the official MCP Go SDK's client: at URL (Streamable\n" +
			"HTTP), or a server it starts itself with --stdio. It lists the server's tools and prints the\n" +
			"sha256 of each tool's definition (its name, description, inputSchema and annotations, as\n" +
			"canonical JSON: see docs/pinning.md) as the pinnedTools map of an MCPUpstream's spec, YAML\n" +
			"ready to paste (-o json: JSON). The MCP proxy and `toolgate mcp stdio --pins` compare every\n" +
			"tools/list answer with these digests. Review the tools' definitions before pinning them.",
		Example: "  toolgate mcp pin https://mcp.example/mcp\n" +
			"  toolgate mcp pin -o json http://127.0.0.1:9000/mcp\n" +
			"  toolgate mcp pin --stdio -- npx -y @modelcontextprotocol/server-filesystem /srv > pins.yaml",
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMCPPin(cmd, o, args, streamsOf(cmd))
		},
	}
	o.Output = outputYAML
	cmd.Flags().VarP(&o.Output, "output", "o", "output format: yaml or json")
	cmd.Flags().BoolVar(&o.Stdio, "stdio", false, "start the server given after -- and speak MCP over its stdin and stdout")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 30*time.Second, "give up connecting and listing after this long")
	cmd.Flags().StringVar(&o.HeaderFile, "header-file", "", "send the header line in this file (e.g. \"Authorization: Bearer ...\") with every request to URL, as the sidecar's --mcp-upstream-auth does")
	return cmd
}

func runMCPPin(cmd *cobra.Command, o *MCPPinOptions, args []string, s streams) error {
	path := cmd.CommandPath()
	dash := cmd.ArgsLenAtDash()
	var transport sdk.Transport
	var target string
	switch {
	case o.Output == outputText:
		return exitcode.Usagef("%s: -o text: pin prints yaml or json", path)
	case o.Timeout <= 0:
		return exitcode.Usagef("%s: --timeout %s: must be positive", path, o.Timeout)
	case o.Stdio && o.HeaderFile != "":
		return exitcode.Usagef("%s: --header-file is sent to a URL; a --stdio server gets no HTTP headers", path)
	case o.Stdio && (dash != 0 || len(args) == 0):
		return exitcode.Usagef("%s: --stdio starts the server given after --: %s --stdio -- COMMAND [ARG...]", path, path)
	case o.Stdio:
		target = strings.Join(args, " ")
		c := exec.Command(args[0], args[1:]...)
		c.Stderr = s.err
		transport = &sdk.CommandTransport{Command: c, TerminateDuration: time.Second}
	case len(args) != 1 || dash >= 0:
		return exitcode.Usagef("%s: give the server's URL, or --stdio -- COMMAND [ARG...]", path)
	default:
		target = args[0]
		u, err := url.Parse(target)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return exitcode.Usagef("%s: %q is not an http or https URL", path, target)
		}
		hc := &http.Client{}
		if o.HeaderFile != "" {
			name, value, err := mcp.ReadHeaderFile(o.HeaderFile)
			if err != nil {
				return exitcode.Usagef("%s: --header-file: %v", path, err)
			}
			hc.Transport = withHeader{base: http.DefaultTransport, name: name, value: value}
		}
		transport = &sdk.StreamableClientTransport{Endpoint: target, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), o.Timeout)
	defer cancel()
	pins, server, err := listPins(ctx, transport)
	if err != nil {
		return fmt.Errorf("%s %s: %w", path, target, err)
	}
	doc, err := json.Marshal(map[string]any{"pinnedTools": pins})
	if err != nil {
		return err
	}
	fmt.Fprintf(s.err, "%s: %d tools of %s pinned\n", path, len(pins), server)
	return writeJSONAs(s.out, o.Output, doc)
}

// listPins connects through transport and returns the digest of every tool
// the server lists, by name, and the server's name and version. The
// digests are of the tools as the server wrote them (each tools/list
// result as read off the connection), not as the SDK decodes them: the
// proxy digests what the server sends.
func listPins(ctx context.Context, transport sdk.Transport) (map[string]string, string, error) {
	raw := &rawToolLists{}
	client := sdk.NewClient(&sdk.Implementation{Name: "toolgate-mcp-pin", Version: Version}, nil)
	cs, err := client.Connect(ctx, &capturingTransport{Transport: transport, lists: raw}, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", fmt.Errorf("no MCP server answered: %w", ctx.Err())
		}
		return nil, "", fmt.Errorf("not reachable as an MCP server: %w", err)
	}
	defer func() { _ = cs.Close() }()
	server := "the server"
	if info := cs.InitializeResult(); info != nil && info.ServerInfo != nil {
		server = info.ServerInfo.Name + " " + info.ServerInfo.Version
		if info.Capabilities == nil || info.Capabilities.Tools == nil {
			return nil, "", fmt.Errorf("%s offers no tools (its capabilities have none): nothing to pin", server)
		}
	}
	params := &sdk.ListToolsParams{}
	for range 64 {
		page, err := cs.ListTools(ctx, params)
		if err != nil {
			return nil, "", fmt.Errorf("listing the tools: %w", err)
		}
		if page.NextCursor == "" {
			break
		}
		params.Cursor = page.NextCursor
	}
	pins := map[string]string{}
	for _, result := range raw.results() {
		var page struct {
			Tools []json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(result, &page); err != nil {
			return nil, "", fmt.Errorf("the tools/list result does not decode: %w", err)
		}
		for _, t := range page.Tools {
			name, digest, err := pin.Digest(t)
			if err != nil {
				return nil, "", err
			}
			if !pin.ValidToolName(name) {
				return nil, "", fmt.Errorf("tool %q cannot be pinned: MCP tool names are 1-%d of A-Z, a-z, 0-9, '_', '-' or '.'", name, pin.MaxToolNameLength)
			}
			if _, dup := pins[name]; dup {
				return nil, "", fmt.Errorf("the server lists tool %q twice", name)
			}
			pins[name] = digest
		}
	}
	switch {
	case len(pins) == 0:
		return nil, "", fmt.Errorf("%s lists no tools: nothing to pin", server)
	case len(pins) > pin.MaxTools:
		return nil, "", fmt.Errorf("%s lists %d tools; an MCPUpstream pins at most %d", server, len(pins), pin.MaxTools)
	}
	return pins, server, nil
}

// withHeader adds one header (the --header-file credential) to every
// request.
type withHeader struct {
	base        http.RoundTripper
	name, value string
}

func (h withHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, h.value)
	return h.base.RoundTrip(r)
}

// capturingTransport is transport, keeping the raw result of every
// tools/list answered on its connection.
type capturingTransport struct {
	sdk.Transport
	lists *rawToolLists
}

func (t *capturingTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &capturingConn{Connection: c, lists: t.lists}, nil
}

type rawToolLists struct {
	mu    sync.Mutex
	ids   []jsonrpc.ID
	pages []json.RawMessage
}

func (r *rawToolLists) results() []json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.pages)
}

type capturingConn struct {
	sdk.Connection
	lists *rawToolLists
}

func (c *capturingConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "tools/list" && req.ID.IsValid() {
		c.lists.mu.Lock()
		c.lists.ids = append(c.lists.ids, req.ID)
		c.lists.mu.Unlock()
	}
	return c.Connection.Write(ctx, msg)
}

func (c *capturingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.Error == nil {
		c.lists.mu.Lock()
		if i := slices.Index(c.lists.ids, resp.ID); i >= 0 {
			c.lists.ids = slices.Delete(c.lists.ids, i, i+1)
			c.lists.pages = append(c.lists.pages, slices.Clone(resp.Result))
		}
		c.lists.mu.Unlock()
	}
	return msg, err
}
