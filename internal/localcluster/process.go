package localcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Process is a toolgate process started by the cluster, logging to a file.
type Process struct {
	Name string
	Cmd  *exec.Cmd
	Log  string
	done chan struct{}
}

// StartProcess runs bin with args; its output goes to Dir/<name>.log. The
// cluster stops it on Stop.
func (c *Cluster) StartProcess(name, bin string, args ...string) (*Process, error) {
	p, err := startLogged(name, filepath.Join(c.Dir, name+".log"), nil, bin, args...)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// startLogged starts bin in its own process group (so stopping it stops
// its children too), with env added to ours and its output in logPath.
func startLogged(name, logPath string, env []string, bin string, args ...string) (*Process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, Cmd: cmd, Log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM to the process group, then SIGKILL after 10 s.
func (p *Process) Stop() { p.stopWithin(10 * time.Second) }

// stopWithin sends SIGTERM to the process group, then SIGKILL after grace.
func (p *Process) stopWithin(grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// LogTail returns the last n bytes of the process log, for failure messages.
func (p *Process) LogTail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
