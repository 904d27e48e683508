// Package redistest runs a real redis-server for tests: Debian's binary
// from PATH, on 127.0.0.1 with a free port, without persistence, stopped
// when the test ends. A test that needs Redis fails (never skips) when
// redis-server is not installed: CI installs it (.ci/run).
package redistest

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startDeadline bounds how long a redis-server may take to answer PING
// after it was started (it starts in milliseconds on loopback).
const startDeadline = 10 * time.Second

// Server is one redis-server process a test started.
type Server struct {
	// Addr is host:port, on 127.0.0.1.
	Addr string
	// Password is what requirepass was set to ("" for none).
	Password string
	// Log is the server's log file, kept in the test's temporary
	// directory and printed when the test fails.
	Log string

	t    testing.TB
	dir  string
	port int
	args []string

	tlsCert, tlsKey string

	mu     sync.Mutex
	proc   *os.Process
	exited chan error // receives once the running process has exited
	killed error      // how the last process killed ended (signal: killed)
}

// Option changes how Start runs the server.
type Option func(*Server)

// WithPassword sets requirepass: clients must AUTH with it.
func WithPassword(pw string) Option { return func(s *Server) { s.Password = pw } }

// WithTLS serves TLS only (no plain port) with the PEM certificate and
// key files; clients are not asked for certificates.
func WithTLS(certFile, keyFile string) Option {
	return func(s *Server) { s.tlsCert, s.tlsKey = certFile, keyFile }
}

// WithArgs adds redis-server command-line options ("--databases", "4").
func WithArgs(args ...string) Option { return func(s *Server) { s.args = append(s.args, args...) } }

// Start starts redis-server and waits until it answers. It is stopped (and
// its log printed if the test failed) when the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not on PATH: install redis-server (apt-get install redis-server): %v", err)
	}
	s := &Server{t: t, dir: t.TempDir()}
	for _, o := range opts {
		o(s)
	}
	s.Log = filepath.Join(s.dir, "redis.log")
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			s.printLog()
		}
	})
	// A free port can be taken by someone else between our probe and the
	// server's bind: try a few.
	var err error
	for range 5 {
		if s.port, err = freePort(); err != nil {
			continue
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
		if err = s.start(); err == nil {
			return s
		}
	}
	t.Fatalf("starting redis-server: %v", err)
	return nil
}

// Stop kills the server at once (SIGKILL, as a crash or a node lost would):
// clients' connections break. Restart starts it again on the same port.
func (s *Server) Stop() { s.Kill() }

// Kill sends SIGKILL and waits for the process to be gone. It does nothing
// when the server is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	_ = s.proc.Kill()
	s.killed = <-s.exited
	s.proc, s.exited = nil, nil
}

// Restart starts the server again on the same address, empty (it keeps no
// data), after Stop; it waits until the server answers.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	// The port was just released; another process may hold it briefly.
	deadline := time.Now().Add(startDeadline)
	for {
		err := s.start()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("restarting redis-server on %s: %v", s.Addr, err)
		}
	}
}

func (s *Server) start() error {
	port := []string{"--port", strconv.Itoa(s.port)}
	if s.tlsCert != "" {
		port = []string{"--port", "0", "--tls-port", strconv.Itoa(s.port),
			"--tls-cert-file", s.tlsCert, "--tls-key-file", s.tlsKey, "--tls-auth-clients", "no"}
	}
	args := append(port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--logfile", s.Log, "--daemonize", "no", "--protected-mode", "yes")
	if s.Password != "" {
		args = append(args, "--requirepass", s.Password)
	}
	args = append(args, s.args...)
	cmd := exec.Command("redis-server", args...)
	// Its own process group: a terminal's ^C reaches the test binary,
	// which kills the server in its cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(startDeadline)
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("redis-server exited at start (%v); its log:\n%s", err, s.tail())
		default:
		}
		if s.ping() == nil {
			s.mu.Lock()
			s.proc, s.exited = cmd.Process, exited
			s.mu.Unlock()
			return nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			err := <-exited
			return fmt.Errorf("redis-server did not answer PING on %s within %s (killed: %v); its log:\n%s", s.Addr, startDeadline, err, s.tail())
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
}

// ping sends an inline PING: any reply (+PONG, or -NOAUTH with a
// password) means the server is up and serving.
func (s *Server) ping() error {
	var c net.Conn
	var err error
	d := &net.Dialer{Timeout: time.Second}
	if s.tlsCert != "" {
		// Only whether it answers: the tests check the certificate.
		c, err = tls.DialWithDialer(d, "tcp", s.Addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a readiness probe
	} else {
		c, err = d.Dial("tcp", s.Addr)
	}
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.HasPrefix(line, "-LOADING") || (line[0] != '+' && line[0] != '-') {
		return fmt.Errorf("not ready: %q", line)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) tail() string {
	b, err := os.ReadFile(s.Log)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

func (s *Server) printLog() { s.t.Logf("redis-server log (%s):\n%s", s.Log, s.tail()) }
