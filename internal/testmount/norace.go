//go:build !race

package testmount

const raceEnabled = false
