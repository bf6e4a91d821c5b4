//go:build race

package testmount

// raceEnabled makes the daemon under test a -race build too.
const raceEnabled = true
