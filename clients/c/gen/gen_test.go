package main

import (
	"bytes"
	"os"
	"testing"
)

// TestTableCurrent: clients/c/printable.h is what gen writes with this
// Go's Unicode tables (run `go run ./clients/c/gen > clients/c/printable.h`
// if not).
func TestTableCurrent(t *testing.T) {
	var b bytes.Buffer
	if err := table(&b); err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("../printable.h")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, b.Bytes()) {
		t.Fatal("clients/c/printable.h is out of date: go run ./clients/c/gen > clients/c/printable.h")
	}
}
