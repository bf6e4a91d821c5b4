package sandbox

import (
	"io"
	"os"

	"github.com/opencontainers/runc/libcontainer"
)

// stdio gives the process its standard streams. Files are passed as they
// are; other readers and writers, and every output when there is an
// output limit, go through pipes copied by goroutines that Run waits for.
func (r *run) stdio(p *libcontainer.Process) error {
	if r.opts.Stdin != nil {
		if f, ok := r.opts.Stdin.(*os.File); ok {
			p.Stdin = f
		} else {
			pr, pw, err := os.Pipe()
			if err != nil {
				return err
			}
			p.Stdin = pr
			r.childEnds = append(r.childEnds, pr)
			r.closers = append(r.closers, pw)
			// Not waited for: the reader may block forever (a terminal).
			// Closing pw when Run returns ends it at its next write.
			go func() {
				io.Copy(pw, r.opts.Stdin)
				pw.Close()
			}()
		}
	}
	var err error
	if p.Stdout, err = r.output(r.opts.Stdout); err != nil {
		return err
	}
	p.Stderr, err = r.output(r.opts.Stderr)
	return err
}

func (r *run) output(w io.Writer) (io.Writer, error) {
	if w == nil {
		return nil, nil
	}
	if f, ok := w.(*os.File); ok && r.opts.Limits.OutputBytes == 0 {
		return f, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	r.childEnds = append(r.childEnds, pw)
	r.closers = append(r.closers, pr)
	r.copies.Add(1)
	go func() {
		defer r.copies.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := pr.Read(buf)
			if n > 0 {
				b := r.allow(buf[:n])
				if len(b) > 0 {
					w.Write(b)
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return pw, nil
}

// allow returns the part of b the output limit lets through, and kills
// the sandbox once the limit is passed.
func (r *run) allow(b []byte) []byte {
	limit := r.opts.Limits.OutputBytes
	if limit == 0 {
		return b
	}
	r.mu.Lock()
	left := limit - r.written
	over := int64(len(b)) > left
	if over {
		b = b[:max(left, 0)]
	}
	r.written += int64(len(b))
	first := over && !r.limited
	if over {
		r.limited = true
	}
	r.mu.Unlock()
	if first {
		r.kill()
	}
	return b
}
