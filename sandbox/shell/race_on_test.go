//go:build race

package shell

// raceEnabled: the race detector multiplies the memory a process uses.
const raceEnabled = true
