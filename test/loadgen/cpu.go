package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Why CPU per decision: on a shared 2-core VM a run's throughput moves with
// how much of the machine other tenants take (steal time) and with how
// much of it the load generator itself takes, which grows with the
// server's speed: the faster server is handicapped. The CPU a server
// spends per decision is neither: the kernel counts only the time the
// server's threads ran. make compare-opa-server reports both.

// userHZ is the unit of the CPU times in /proc/PID/stat: USER_HZ, which
// Linux fixes at 100 for user space on every architecture it runs on.
const userHZ = 100

// processCPU is the user plus system CPU time of process pid and all its
// threads, from /proc/PID/stat.
func processCPU(pid int) (time.Duration, error) {
	doc, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("-server-pid %d: %w", pid, err)
	}
	cpu, err := parseStatCPU(doc)
	if err != nil {
		return 0, fmt.Errorf("-server-pid %d: /proc/%d/stat: %w", pid, pid, err)
	}
	return cpu, nil
}

// parseStatCPU reads utime and stime (fields 14 and 15) from a
// /proc/PID/stat line. The command name (field 2) is in parentheses and
// may hold spaces and parentheses itself, so fields are counted from the
// last ')'.
func parseStatCPU(doc []byte) (time.Duration, error) {
	end := bytes.LastIndexByte(doc, ')')
	if end < 0 || !bytes.Contains(doc[:end], []byte(" (")) {
		return 0, errors.New("no (command) field")
	}
	fields := bytes.Fields(doc[end+1:]) // from field 3, the state
	if len(fields) < 13 {
		return 0, fmt.Errorf("%d fields after the command, want at least 13", len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(string(f), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("CPU time %q is not a tick count", f)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// selfCPU is this process's user plus system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMeter takes the CPU times of the server (pid, when positive) and of
// the load generator at the start and end of the measured run.
type cpuMeter struct {
	pid                int
	withSidecar        bool // -self: this process is the sidecar too
	server0, self0     time.Duration
	serverCPU, selfCPU time.Duration
	err                error
}

func (m *cpuMeter) start() {
	m.self0 = selfCPU()
	if m.pid > 0 {
		m.server0, m.err = processCPU(m.pid)
	}
}

func (m *cpuMeter) stop() {
	m.selfCPU = selfCPU() - m.self0
	if m.pid > 0 && m.err == nil {
		var now time.Duration
		now, m.err = processCPU(m.pid)
		m.serverCPU = now - m.server0
	}
}
