//go:build !race

package kv

// raceEnabled tells tests that the race detector slows everything down.
const raceEnabled = false
