package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// mcpPolicy governs the files MCP server: reads are allowed, except under
// /secrets/ (decided on the call's argument), and deletes never.
const mcpPolicy = `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata:
  name: mcp-files
spec:
  rules:
  - id: files-no-secrets
    description: nothing under /secrets/ is read by agents
    effect: deny
    conditions:
    - {field: server, operator: eq, value: files}
    - {field: input.path, operator: starts_with, value: /secrets/}
  - id: files-no-delete
    description: agents never delete files
    effect: deny
    conditions:
    - {field: server, operator: eq, value: files}
    - {field: tool_name, operator: eq, value: delete_file}
  - id: files-read
    description: agents may read files over MCP
    effect: allow
    conditions:
    - {field: server, operator: eq, value: files}
    - {field: tool_name, operator: eq, value: read_file}
`

// mcp prints the curl command an MCP client's POST amounts to, runs
// exactly that, prints the answer (an event stream, as the SDK's server
// sends it), and sums it up in one line.
func (d *demo) mcp(url, body string) error {
	line, out, err := d.curlShown("-s", url, "-H", "Content-Type: application/json", "-H", "Accept: application/json, text/event-stream", "-d", body)
	if err != nil {
		return err
	}
	var msg mcpAnswer
	if err := json.Unmarshal(eventData(out), &msg); err != nil {
		return fmt.Errorf("%s: the answer is not JSON-RPC: %w", line, err)
	}
	switch {
	case msg.Error != nil:
		return fmt.Errorf("%s: %s", line, msg.Error.Message)
	case msg.Result.Tools != nil:
		fmt.Fprintln(d.out, "    => tools: "+strings.Join(msg.toolNames(), " "))
	case msg.Result.IsError && len(msg.Result.Content) > 0:
		fmt.Fprintln(d.out, "    => DENIED by toolgate: "+msg.Result.Content[0].Text)
	case len(msg.Result.Content) > 0:
		fmt.Fprintln(d.out, "    => the server answered: "+msg.Result.Content[0].Text)
	}
	return nil
}

// eventData is the data of an event-stream answer's event, or the answer
// itself when it is plain JSON.
func eventData(b []byte) []byte {
	for _, l := range bytes.Split(b, []byte("\n")) {
		if d, ok := bytes.CutPrefix(l, []byte("data: ")); ok {
			return d
		}
	}
	return b
}

// mcpToolNames lists the tools the proxy shows, quietly (to wait on).
func mcpToolNames(url string) ([]string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"tools/list"}`))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, err
	}
	var msg mcpAnswer
	if err := json.Unmarshal(eventData(buf.Bytes()), &msg); err != nil {
		return nil, err
	}
	return msg.toolNames(), nil
}

// mcpAnswer is what the demo reads of a JSON-RPC answer.
type mcpAnswer struct {
	Result struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	} `json:"result"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func (a *mcpAnswer) toolNames() []string {
	names := make([]string, 0, len(a.Result.Tools))
	for _, t := range a.Result.Tools {
		names = append(names, t.Name)
	}
	return names
}

// stdioGuard is `toolgate mcp stdio` as an agent's MCP configuration
// starts it: the demo writes the agent's messages on its stdin and reads
// the answers on its stdout, printing both.
type stdioGuard struct {
	d    *demo
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	errs bytes.Buffer
}

// startStdio prints the command line and starts exactly that, with the
// demo's directory, where both binaries are, first on PATH.
func (d *demo) startStdio(bin string, args ...string) (*stdioGuard, error) {
	fmt.Fprintln(d.out, "$ toolgate "+shellJoin(args))
	g := &stdioGuard{d: d, cmd: exec.Command(bin, args...)}
	g.cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	g.cmd.Stderr = &g.errs
	var err error
	if g.in, err = g.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := g.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	g.out = bufio.NewReader(out)
	return g, g.cmd.Start()
}

// send writes one message, as the agent would, and for a request (id set)
// prints the answer and sums up a call's.
func (g *stdioGuard) send(msg string, id int) error {
	fmt.Fprintln(g.d.out, "    > "+msg)
	if _, err := io.WriteString(g.in, msg+"\n"); err != nil {
		return fmt.Errorf("writing to toolgate mcp stdio: %w\n%s", err, g.errs.String())
	}
	if id == 0 {
		return nil
	}
	for {
		line, err := g.out.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("no answer to %d from toolgate mcp stdio: %w\n%s", id, err, g.errs.String())
		}
		var msg struct {
			ID int `json:"id"`
			mcpAnswer
		}
		if json.Unmarshal(line, &msg) != nil || msg.ID != id {
			continue // not the answer waited for
		}
		fmt.Fprintln(g.d.out, "    < "+strings.TrimSpace(string(line)))
		switch {
		case msg.Error != nil:
			return fmt.Errorf("toolgate mcp stdio answered %d with an error: %s", id, msg.Error.Message)
		case msg.Result.IsError && len(msg.Result.Content) > 0:
			fmt.Fprintln(g.d.out, "    => DENIED by toolgate: "+msg.Result.Content[0].Text)
		case len(msg.Result.Content) > 0:
			fmt.Fprintln(g.d.out, "    => the server answered: "+msg.Result.Content[0].Text)
		}
		return nil
	}
}

// stop ends the agent's input: the server's ends too, and both exit.
func (g *stdioGuard) stop() error {
	_ = g.in.Close()
	done := make(chan error, 1)
	go func() { done <- g.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("toolgate mcp stdio: %w\n%s", err, g.errs.String())
		}
		return nil
	case <-time.After(10 * time.Second):
		_ = g.cmd.Process.Kill()
		return fmt.Errorf("toolgate mcp stdio did not exit after its input ended\n%s", g.errs.String())
	}
}
