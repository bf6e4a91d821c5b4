package s3test

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestCleanupKillsServer(t *testing.T) {
	var pid int
	var endpoint string
	t.Run("server", func(t *testing.T) {
		s := Start(t)
		pid, endpoint = s.cmd.Process.Pid, s.Endpoint
		if err := syscall.Kill(pid, 0); err != nil {
			t.Fatalf("server process %d not running: %v", pid, err)
		}
	})
	if pid == 0 {
		t.Fatal("subtest did not start a server")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("server process %d still exists after cleanup (kill 0: %v)", pid, err)
	}
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(endpoint, "http://"), time.Second)
	if err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after cleanup", endpoint)
	}
}
