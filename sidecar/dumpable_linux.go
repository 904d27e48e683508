package sidecar

import "golang.org/x/sys/unix"

// makeUndumpable clears the process's dumpable flag, as ssh-agent and gpg-
// agent do. The kernel then lets no process of another thread group read
// its /proc/PID/environ, /proc/PID/mem or /proc/PID/root, nor trace it,
// unless it holds CAP_SYS_PTRACE: a container of the agent's Pod that runs
// as the sidecar's user and sees its process (a shared process namespace,
// which the injector refuses, or a runtime that shares one anyway) cannot
// read the MCP upstream credentials or the API token through them. The
// sidecar reads its own /proc as before (the process metrics).
func makeUndumpable() error { return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }
