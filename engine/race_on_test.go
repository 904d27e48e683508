//go:build race

package engine

// raceEnabled: the race detector makes sync.Pool drop items on purpose, so
// allocation counts of pooled paths mean nothing under it.
const raceEnabled = true
