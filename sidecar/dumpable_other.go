//go:build !linux

package sidecar

// makeUndumpable does nothing outside Linux, where no agent container
// shares the sidecar's process namespace.
func makeUndumpable() error { return nil }
