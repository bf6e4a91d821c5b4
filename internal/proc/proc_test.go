package proc

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestRunning(t *testing.T) {
	if !Running(os.Getpid()) {
		t.Fatal("this process is not running")
	}
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if !Running(pid) {
		t.Fatal("a sleeping child is not running")
	}
	cmd.Process.Kill()
	// Killed but not reaped: a zombie.
	for deadline := time.Now().Add(5 * time.Second); Running(pid); {
		if time.Now().After(deadline) {
			t.Fatal("a killed child still runs after 5 s")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
		t.Fatalf("the zombie should still be there until reaped: %v", err)
	}
	cmd.Wait()
	if Running(pid) {
		t.Fatal("a reaped child is running")
	}
	if Running(0) || Running(-1) {
		t.Fatal("pid 0 or -1 is running")
	}
}

func TestZombie(t *testing.T) {
	for stat, want := range map[string]bool{
		"12 (sh) S 1 12":           false,
		"12 (a) b) Z 1 12":         true,
		"12 (x) X 0":               true,
		"12 (name with ) in it) R": false,
		"garbage":                  false,
	} {
		if got := zombie([]byte(stat)); got != want {
			t.Errorf("zombie(%q) = %v, want %v", stat, got, want)
		}
	}
}

// A process whose main thread has exited while another still runs: its
// main thread is a zombie, but the process holds its files until the last
// thread is done (what a SIGKILLed daemon looks like for a moment).
func TestRunningAfterMainThreadExit(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "leader.c")
	prog := `#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static void *worker(void *arg) { (void)arg; sleep(2); return 0; }
int main(void) {
	pthread_t th;
	pthread_create(&th, 0, worker, 0);
	printf("ready\n");
	fflush(stdout);
	pthread_exit(0);
}
`
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "leader")
	if out, err := exec.Command("gcc", "-pthread", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	// Wait for the main thread to become a zombie.
	for deadline := time.Now().Add(time.Second); ; time.Sleep(time.Millisecond) {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err == nil && zombie(stat) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the main thread did not exit")
		}
	}
	if !Running(pid) {
		t.Fatal("Running says no while a thread still runs")
	}
	for deadline := time.Now().Add(5 * time.Second); Running(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("still running 5 s after the worker's 2 s")
		}
	}
}
