// Command agentapp is the agent of the real-node tests, and the sandbox
// (pause) image: one static binary, its role chosen by the first argument.
//
//	pause             sleep until SIGTERM or SIGINT, reaping children
//	evaluate URL JSON POST JSON to URL's /v1/evaluate (http://host:port or
//	                  unix:///path; "env" means $TOOLGATE_URL) and print the answer
//	                  (each role's calls give up after 5 s, plus the JSON's
//	                  "wait" when it has one: the sidecar holds that answer
//	                  until a person decides)
//	read PATH         print the size of the file at PATH, or fail
//	job JSON          wait up to 60 s for the sidecar at $TOOLGATE_URL to answer
//	                  JSON with HTTP 200, print it, exit 0
//	watch URL JSON FIELD VALUE
//	                  ask every 10 ms until the answer's FIELD is VALUE (for up
//	                  to 30 s), printing "watching" at the first answer; then
//	                  print "at=<unix ns>" and the answer
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	role := "pause"
	if len(os.Args) > 1 {
		role = os.Args[1]
	}
	switch {
	case role == "pause":
		pause()
	case role == "evaluate" && len(os.Args) == 4:
		status, body, err := evaluate(os.Args[2], os.Args[3])
		if err != nil {
			fmt.Fprintln(os.Stderr, "evaluate:", err)
			os.Exit(1)
		}
		fmt.Print(body)
		if status != http.StatusOK {
			fmt.Fprintln(os.Stderr, "HTTP", status)
			os.Exit(1)
		}
	case role == "read" && len(os.Args) == 3:
		b, err := os.ReadFile(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, "read:", err)
			os.Exit(1)
		}
		fmt.Printf("read %d bytes\n", len(b))
	case role == "job" && len(os.Args) == 3:
		deadline := time.Now().Add(60 * time.Second)
		for {
			status, body, err := evaluate("env", os.Args[2])
			if err == nil && status == http.StatusOK {
				fmt.Print(body)
				return
			}
			if time.Now().After(deadline) {
				fmt.Fprintln(os.Stderr, "job: no answer:", status, body, err)
				os.Exit(1)
			}
			time.Sleep(200 * time.Millisecond)
		}
	case role == "watch" && len(os.Args) == 6:
		deadline := time.Now().Add(30 * time.Second)
		watching := false
		for time.Now().Before(deadline) {
			if status, body, err := evaluate(os.Args[2], os.Args[3]); err == nil && status == http.StatusOK {
				if !watching {
					fmt.Println("watching")
					watching = true
				}
				var answer map[string]any
				if json.Unmarshal([]byte(body), &answer) == nil && fmt.Sprint(answer[os.Args[4]]) == os.Args[5] {
					fmt.Printf("at=%d\n%s", time.Now().UnixNano(), body)
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		fmt.Fprintln(os.Stderr, "watch: timed out")
		os.Exit(1)
	default:
		fmt.Fprintln(os.Stderr, "usage: agentapp pause | evaluate URL JSON | read PATH | job JSON | watch URL JSON FIELD VALUE")
		os.Exit(2)
	}
}

func pause() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			var ws syscall.WaitStatus
			if pid, _ := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 {
				break
			}
		}
	}
}

func evaluate(url, body string) (int, string, error) {
	if url == "env" {
		url = os.Getenv("TOOLGATE_URL")
	}
	transport := &http.Transport{}
	base := strings.TrimSuffix(url, "/")
	if sock, ok := strings.CutPrefix(url, "unix://"); ok {
		transport.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}
		base = "http://sidecar"
	}
	c := &http.Client{Timeout: answerTimeout + heldFor(body), Transport: transport}
	resp, err := c.Post(base+"/v1/evaluate", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// answerTimeout is how long a call may take to be answered when the
// sidecar does not hold it.
const answerTimeout = 5 * time.Second

// heldFor is the "wait" a request body asks the sidecar to hold its answer
// for (a call an ask rule decides waits up to that long for a person), or
// 0; a malformed one is the sidecar's to refuse.
func heldFor(body string) time.Duration {
	var req struct {
		Wait string `json:"wait"`
	}
	if json.Unmarshal([]byte(body), &req) != nil {
		return 0
	}
	d, err := time.ParseDuration(req.Wait)
	if err != nil || d < 0 {
		return 0
	}
	return d
}
