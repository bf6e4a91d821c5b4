package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/computerfs/computerfs/internal/testmount"
)

// fakeDaemon answers exec calls on a workspace's control socket with
// whatever a test sets, as a hostile or broken daemon could.
type fakeDaemon struct {
	mu     sync.Mutex
	answer []byte // written whole, then the connection closes
	hold   bool   // after the answer, wait for the client to go
	last   []byte // the last request, head and body
	got    chan struct{}
	gone   chan struct{}
}

// startFake puts a fakeDaemon in place of the control socket of a real
// mount's daemon (which keeps running: its socket is put back when the
// test ends), and empties the store's lock file so that the clients do
// not wait for that daemon to end when an answer breaks off.
func startFake(t *testing.T) (*testmount.Mount, *fakeDaemon) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"), "--no-sandbox")
	sock, lock := filepath.Join(m.Store, "control.sock"), filepath.Join(m.Store, "lock")
	pid, err := os.ReadFile(lock)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sock, sock+".real"); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(lock, nil, 0o644)
	t.Cleanup(func() {
		l.Close()
		os.WriteFile(lock, pid, 0o644)
		if err := os.Rename(sock+".real", sock); err != nil {
			t.Error(err)
		}
	})
	d := &fakeDaemon{got: make(chan struct{}, 100), gone: make(chan struct{}, 100)}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go d.serve(c)
		}
	}()
	return m, d
}

func (d *fakeDaemon) set(answer string, hold bool) {
	d.mu.Lock()
	d.answer, d.hold = []byte(answer), hold
	d.mu.Unlock()
}

func (d *fakeDaemon) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	var req bytes.Buffer
	n := 0
	for {
		line, err := br.ReadString('\n')
		req.WriteString(line)
		if err != nil {
			return
		}
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Content-Length") {
			n, _ = strconv.Atoi(strings.TrimSpace(v))
		}
		if line == "\r\n" {
			break
		}
	}
	body := make([]byte, n)
	io.ReadFull(br, body)
	req.Write(body)
	d.mu.Lock()
	d.last = req.Bytes()
	answer, hold := d.answer, d.hold
	d.mu.Unlock()
	select {
	case d.got <- struct{}{}:
	default: // nobody waits for it
	}
	c.Write(answer)
	if hold {
		io.Copy(io.Discard, c)
		d.gone <- struct{}{}
	}
}

const ok200 = "HTTP/1.0 200 OK\r\nContent-Type: application/x-ndjson\r\n\r\n"

// TestCClientHostileDaemon: whatever the daemon answers, the C client
// does not crash (under ASan and UBSan) and ends as the Go client does:
// the same stdout and exit status, and the same stderr but where both
// say that an event is not valid JSON (the detail of that message is
// the C parser's own). Valid but unusual JSON (keys in another case,
// duplicates, byte arrays, escapes, nulls) is read as Go reads it; the
// bounds (64 KiB a line of the head, 32 MiB a line of events, 100
// headers) are the Go client's to the byte. Then 300 random mutations of
// a valid answer; then the request each client sends, byte for byte;
// then a cancelled call.
func TestCClientHostileDaemon(t *testing.T) {
	thin := testmount.Tool(t, "computerfs-exec")
	cs := cClients(t)
	m, d := startFake(t)
	args := []string{"-w", m.Dir, "-v", "--", "true"}
	compare := func(name, answer string, exact bool) {
		t.Helper()
		d.set(answer, false)
		out, errOut, code := runClient(t, thin, invocation{args: args})
		for _, c := range cs {
			cout, cerrOut, ccode := runClient(t, c, invocation{args: args})
			same := cerrOut == errOut
			if !exact && !same { // the same but for the detail of a JSON error, on the last line
				const p = "computerfs exec: exec answer: "
				last := func(s string) (string, string) {
					i := strings.LastIndex(strings.TrimSuffix(s, "\n"), "\n")
					return s[:i+1], s[i+1:]
				}
				before, msg := last(errOut)
				cbefore, cmsg := last(cerrOut)
				same = before == cbefore && strings.HasPrefix(msg, p) && strings.HasPrefix(cmsg, p) && strings.Count(cmsg, "\n") == 1
			}
			if cout != out || ccode != code || !same {
				t.Errorf("%s: answer %.200q:\nGo client: exit %d, stdout %.200q, stderr %.300q\nC client:  exit %d, stdout %.200q, stderr %.300q",
					name, answer, code, out, errOut, ccode, cout, cerrOut)
			}
		}
	}
	res := `{"result":{"exit_code":3,"backend":"shell","why":"w","request":"7"}}` + "\n"
	headers := func(n int) string {
		return "HTTP/1.0 200 OK\r\n" + strings.Repeat("X-A: b\r\n", n) + "\r\n" + res
	}
	long := func(n int) string { return ok200[:len(ok200)-2] + "X: " + strings.Repeat("a", n-5) + "\r\n\r\n" + res }
	padded := func(n int) string { // an event line of n bytes with its newline
		ev := `{"out":"aGkK"}`
		return ok200 + ev + strings.Repeat(" ", n-len(ev)-1) + "\n" + res
	}
	for _, tc := range []struct {
		name, answer string
		exact        bool
	}{
		{"plain", ok200 + `{"out":"aGkK"}` + "\n" + `{"err":"d2Fybgo="}` + "\n" + res, true},
		{"byte array", ok200 + `{"out":[104,105,10]}` + "\n" + `{"out":[]}` + "\n" + `{"out":[null]}` + "\n" + res, true},
		{"keys in any case", ok200 + `{"OUT":"aGkK"}` + "\n" + `{"Result":{"EXIT_CODE":4,"ſtopped":"x","Backend":"b","pea\u212a_memory":2048,"cpu_time_ms":5,"WARM":true}}` + "\n", true},
		{"duplicates", ok200 + `{"out":"YQ==","out":"Yg=="}` + "\n" + `{"result":{"exit_code":3},"result":null}` + "\n" + `{"result":{"exit_code":3},"result":{"backend":"x"}}` + "\n", true},
		{"nulls and unknowns", ok200 + "null\n{}\n" + `{"out":null,"err":null,"error":null,"result":null}` + "\n" +
			` { "x" : [1, -2.5e+3, {"y":[true,false,null,"\u0041"]}], "error":"", "result" : {"exit_code":2, "z":{}} } ` + "\n", true},
		{"out first", ok200 + `{"out":"YQ==","result":{"exit_code":9}}` + "\n" + `{"result":{"exit_code":0}}` + "\n", true},
		{"escapes", ok200 + `{"result":{"backend":"\u00e9\ud83d\ude00\ud800x\udc00\ud800\u0041","why":"a\"b\\c\/\b\f\n\r\t","request":"\u0000\u001b[2J","stopped":"` + "\xff\xfe\xc3" + `"}}` + "\n", true},
		{"exit 256", ok200 + `{"result":{"exit_code":256}}` + "\n", true},
		{"exit -1", ok200 + `{"result":{"exit_code":-1,"duration_ms":-5}}` + "\n", true},
		{"exit max", ok200 + `{"result":{"exit_code":9223372036854775807,"peak_memory":9223372036854775807}}` + "\n", true},
		{"empty output", ok200 + `{"out":""}` + "\n" + `{"err":""}` + "\n" + res, true},
		{"base64 with newlines", ok200 + `{"out":"aG\r\nk=\n"}` + "\n" + res, true},
		{"error event", ok200 + `{"out":"aGkK"}` + "\n" + `{"error":"bad \u001b]0;pwned\u0007 \u202e \ufffd \u00a0 x\u0000y"}` + "\n" + res, true},
		{"stopped", ok200 + `{"result":{"exit_code":124,"stopped":"timeout 1s"}}` + "\n", true},
		{"CRLF lines", ok200 + `{"out":"aGkK"}` + "\r\n" + strings.TrimSuffix(res, "\n") + "\r\n", true},
		{"last line unended", ok200 + `{"result":{"exit_code":7}}`, true},
		{"deep but allowed", ok200 + `{"x":` + strings.Repeat("[", 9998) + strings.Repeat("]", 9998) + "}\n" + res, true},
		{"refused", "HTTP/1.0 400 Bad Request\r\n\r\n  nope \u00a0\n", true},
		{"refused, long", "HTTP/1.0 400 Bad Request\r\n\r\n" + strings.Repeat("a", 100<<10), true},
		{"refused, empty", "HTTP/1.0 500 Oops\r\n\r\n", true},
		{"refused, escapes", "HTTP/1.1 403 x\r\n\r\n\x1b[31mred\xff\u2028\n", true},
		{"malformed status", "HTTX/1.0 200 OK\r\n\r\n" + res, true},
		{"short status", "HTTP/1.0 20 OK\r\n\r\n" + res, true},
		{"signed status", "HTTP/1.0 +20 OK\r\n\r\nsigned", true},
		{"status only", "HTTP/1.1 200\r\n\r\n" + res, true},
		{"status with escapes", "HTTP/1.0 2\x1b[2J\xff\u00a0\u0085 OK\r\r\n\r\n", true},
		{"100 headers", headers(100), true},
		{"101 headers", headers(101), true},
		{"a 64 KiB header line", long(64 << 10), true},
		{"a longer header line", long(64<<10 + 1), true},
		{"nothing", "", true},
		{"status, then nothing", "HTTP/1.0 200 OK\r\n", true},
		{"head, then nothing", ok200, true},
		{"no result", ok200 + `{"out":"aGkK"}` + "\n", true},
		{"cut in a line", ok200 + `{"out":"aGkK"}` + "\n" + `{"out":"aG`, true},
		{"32 MiB line", padded(32 << 20), true},
		{"a longer line", padded(32<<20 + 1), true},
		{"a line without end", ok200 + `{"out":"` + strings.Repeat("A", 32<<20), true},
		{"empty line", ok200 + "\n" + res, true},
		{"truncated", ok200 + `{"out":"aGk="` + "\n" + res, true},
		{"out a number", ok200 + `{"out":1}` + "\n" + res, false},
		{"bad base64", ok200 + `{"out":"a"}` + "\n" + res, false},
		{"base64 unpadded", ok200 + `{"out":"aGk"}` + "\n" + res, false},
		{"base64 after padding", ok200 + `{"out":"aGk=x"}` + "\n" + res, false},
		{"base64 one pad", ok200 + `{"out":"aG="}` + "\n" + res, false},
		{"fraction", ok200 + `{"result":{"exit_code":1.5}}` + "\n", false},
		{"exponent", ok200 + `{"result":{"exit_code":1e2}}` + "\n", false},
		{"string code", ok200 + `{"result":{"exit_code":"1"}}` + "\n", false},
		{"huge code", ok200 + `{"result":{"exit_code":99999999999999999999}}` + "\n", false},
		{"result array", ok200 + `{"result":[]}` + "\n", false},
		{"result true", ok200 + `{"result":true}` + "\n", false},
		{"error number", ok200 + `{"error":5}` + "\n" + res, false},
		{"byte 256", ok200 + `{"out":[256]}` + "\n" + res, false},
		{"byte -1", ok200 + `{"out":[-1]}` + "\n" + res, false},
		{"byte 1.5", ok200 + `{"out":[1.5]}` + "\n" + res, false},
		{"bool 1", ok200 + `{"result":{"warm":1}}` + "\n", false},
		{"bool string", ok200 + `{"result":{"truncated":"true"}}` + "\n", false},
		{"top-level array", ok200 + "[1]\n" + res, false},
		{"top-level string", ok200 + `"x"` + "\n" + res, false},
		{"top-level number", ok200 + "5\n" + res, false},
		{"top-level true", ok200 + "true\n" + res, false},
		{"open bracket", ok200 + "[\n" + res, false},
		{"close bracket", ok200 + "]\n" + res, false},
		{"garbage after", ok200 + "{} x\n" + res, false},
		{"tru", ok200 + `{"a":tru}` + "\n" + res, false},
		{"control in string", ok200 + "{\"a\":\"\x01\"}\n" + res, false},
		{"bad escape", ok200 + `{"a":"\q"}` + "\n" + res, false},
		{"short unicode escape", ok200 + `{"a":"\u12"}` + "\n" + res, false},
		{"single quotes", ok200 + `{'a':1}` + "\n" + res, false},
		{"no colon", ok200 + `{"a" 1}` + "\n" + res, false},
		{"trailing comma", ok200 + `{"a":1,}` + "\n" + res, false},
		{"leading zero", ok200 + `{"a":01}` + "\n" + res, false},
		{"minus", ok200 + `{"a":-}` + "\n" + res, false},
		{"point", ok200 + `{"a":1.}` + "\n" + res, false},
		{"bare fraction", ok200 + `{"a":.5}` + "\n" + res, false},
		{"bare exponent", ok200 + `{"a":1e}` + "\n" + res, false},
		{"too deep", ok200 + `{"x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + "}\n" + res, false},
		{"much too deep", ok200 + strings.Repeat(`{"a":`, 200000) + "\n" + res, false},
		{"binary", ok200 + "\x00\xff\x80{\n" + res, false},
	} {
		compare(tc.name, tc.answer, tc.exact)
	}

	// Random mutations of a valid answer, seeded: the same outcome.
	valid := ok200 + `{"out":"aGkK"}` + "\n" + `{"err":[119,10],"x":[1,{"y":null}]}` + "\n" +
		`{"result":{"exit_code":3,"backend":"sh\u00e9ll","why":"w","stopped":"s","warm":false,"peak_memory":4096,"request":"7"}}` + "\n"
	const alphabet = "{}[]\":,\\ntfu0123456789-+.eE \r\n\x00\xff\xc3=aAzZ/"
	r := rand.New(rand.NewSource(19))
	for i := 0; i < 300; i++ {
		b := []byte(valid)
		for k := 1 + r.Intn(3); k > 0; k-- {
			at := len(ok200) + r.Intn(len(b)-len(ok200))
			switch c := alphabet[r.Intn(len(alphabet))]; r.Intn(3) {
			case 0:
				b[at] = c
			case 1:
				b = append(b[:at], append([]byte{c}, b[at:]...)...)
			default:
				b = append(b[:at], b[at+1:]...)
			}
		}
		compare(fmt.Sprintf("mutation %d", i), string(b), false)
	}

	// The request, byte for byte.
	d.set(ok200+res, false)
	for _, inv := range []invocation{
		{args: []string{"-w", m.Dir, "--", "ls"}},
		{stdin: "\x00\xffabc\n", args: []string{"-w", m.Dir, "--backend", "sandbox", "--cwd", "/workspace/<é>", "--env", "A=\x01\x7f\u2028\u2029\"\\", "--env", "B=",
			"--timeout", "5s", "--network", "host", "--", "echo \xff\xc3 & <x>\b\f\t\r\n\x1f", "two"}},
		{stdin: strings.Repeat("z", 3<<20+1), args: []string{"-w", m.Dir, "--backend", "", "--", "wc -c"}},
	} {
		var want []byte
		for _, c := range append([]string{thin}, cs...) {
			runClient(t, c, inv)
			d.mu.Lock()
			got := d.last
			d.mu.Unlock()
			if want == nil {
				want = got
			} else if !bytes.Equal(got, want) {
				t.Errorf("%q: the C client sent %.500q, the Go client %.500q", inv.args, got, want)
			}
		}
	}

	// A call cancelled while the daemon holds it: the connection closes
	// and the client says so, with what came before on stdout.
	d.set(ok200+`{"out":"aGkK"}`+"\n", true)
	for _, c := range cs {
		for len(d.got) > 0 {
			<-d.got
		}
		cmd := exec.Command(c, "-w", m.Dir, "--", "sleep 100")
		cmd.Env = append(os.Environ(), testmount.SanitizerEnv...)
		out := &lineWaiter{lines: make(chan string, 1)}
		var errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var first string
		select {
		case first = <-out.lines: // the client has the event
		case <-time.After(time.Minute):
			t.Fatal("no output")
		}
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		select {
		case <-d.gone:
		case <-time.After(time.Minute):
			t.Fatal("the cancelled client's connection stayed open")
		}
		if code := cmd.ProcessState.ExitCode(); code != 1 || first != "hi\n" || errb.String() != "computerfs exec: context canceled\n" {
			t.Errorf("%s cancelled: exit %d, stdout %q, stderr %q", c, code, first, errb.String())
		}
	}
}
