package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// Field 2 may hold spaces and parentheses: fields count from the last ')'.
	line := "4242 (tool gate (x)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 70 0 0 20 0 9 0 100 0 0\n"
	got, err := parseStatCPU([]byte(line))
	if err != nil || got != 3200*time.Millisecond {
		t.Fatalf("got %v, %v; want 3.2s (320 ticks)", got, err)
	}
	bad := map[string]string{
		"empty":             "",
		"no command":        "4242 S 1 2 3 4 5 6 7 8 9 10 11 12 13",
		"too few fields":    "4242 (toolgate) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250",
		"utime not numeric": "4242 (toolgate) S 1 4242 4242 0 -1 4194560 1000 0 0 0 x 70 0",
		"negative stime":    "4242 (toolgate) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 -70 0",
	}
	for name, doc := range bad {
		if got, err := parseStatCPU([]byte(doc)); err == nil {
			t.Errorf("%s: read %v from %q, want an error", name, got, doc)
		}
	}
}

// TestServerCPUIsReported drives a real server process (this binary's
// null server, run as a child) and checks the CPU it reports is the
// child's, from the kernel, not the load generator's.
func TestServerCPUIsReported(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(bin)
	srv.Env = append(os.Environ(), nullServerEnv+"=127.0.0.1:0")
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n') // "null server listening on ADDR"
	addr, found := strings.CutPrefix(strings.TrimSpace(line), "null server listening on ")
	if err != nil || !found {
		t.Fatalf("the child said %q, %v", line, err)
	}
	url := "http://" + addr + "/v1/evaluate"

	before, err := processCPU(srv.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"-url", url, "-d", "1s", "-warmup", "100ms", "-c", "2", "-server-pid", strconv.Itoa(srv.Process.Pid)}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
	}
	after, err := processCPU(srv.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`server cpu ([0-9.]+)us/request \(([0-9.]+) cores\)`).FindStringSubmatch(out.String())
	if m == nil || !strings.Contains(out.String(), "load generator cpu ") {
		t.Fatalf("no CPU lines in:\n%s", out.String())
	}
	perRequest, _ := strconv.ParseFloat(m[1], 64)
	cores, _ := strconv.ParseFloat(m[2], 64)
	n := regexp.MustCompile(`requests ([0-9]+),`).FindStringSubmatch(out.String())
	if n == nil {
		t.Fatalf("no request count in:\n%s", out.String())
	}
	requests, _ := strconv.Atoi(n[1])
	// The child served every request of the run, so it spent CPU on
	// them; what was reported, over the measured second, is within what
	// it spent over the whole run (one 10 ms tick of rounding allowed).
	reported := time.Duration(perRequest * float64(requests) * float64(time.Microsecond))
	if cores <= 0 || cores > 2.5 || reported <= 0 {
		t.Errorf("server cores %v, %v in all; want above 0 and at most the machine", cores, reported)
	}
	if spent := after - before; reported > spent+10*time.Millisecond {
		t.Errorf("reported %v for the server, more than the %v the kernel says it spent", reported, spent)
	}
}

// nullServerEnv makes the test binary a null server on the address it
// names: the server process TestServerCPUIsReported measures.
const nullServerEnv = "LOADGEN_TEST_NULL_SERVER"

func TestMain(m *testing.M) {
	if addr := os.Getenv(nullServerEnv); addr != "" {
		os.Exit(run(context.Background(), []string{"-null-server", addr}, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
