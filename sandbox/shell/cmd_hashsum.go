package shell

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"hash"
	"io"
	"strings"
)

func init() {
	register(&command{names: []string{"md5sum", "sha1sum", "sha256sum", "sha512sum"}, run: cmdHash, opts: opts("cbtwz", "check", "binary", "text", "tag", "quiet", "status", "strict", "warn", "zero"), ignored: []string{"b", "binary", "w", "warn", "z", "zero", "tag", "quiet", "status", "strict"}})
}

func cmdHash(c *cmd) int {
	opts, files, ok := c.flags()
	if !ok {
		return 1
	}
	var newHash func() hash.Hash
	switch c.name {
	case "md5sum":
		newHash = md5.New
	case "sha1sum":
		newHash = sha1.New
	case "sha256sum":
		newHash = sha256.New
	default:
		newHash = sha512.New
	}
	check := false
	for _, o := range opts {
		if o.name == "c" || o.name == "check" {
			check = true
		}
	}
	if check {
		status := 0
		c.eachInput(files, func(name string, r io.Reader) error {
			lines, _ := c.readLines(r)
			for _, l := range lines {
				sum, file, ok := strings.Cut(strings.TrimSuffix(l, "\n"), "  ")
				if !ok {
					continue
				}
				f, err := c.open(file)
				res := "FAILED"
				if err == nil {
					h := newHash()
					io.Copy(h, f)
					f.Close()
					if hex.EncodeToString(h.Sum(nil)) == sum {
						res = "OK"
					}
				} else {
					res = "FAILED open or read"
				}
				if res != "OK" {
					status = 1
				}
				c.out.WriteString(file + ": " + res + "\n")
			}
			return nil
		})
		return status
	}
	return c.eachInput(files, func(name string, r io.Reader) error {
		h := newHash()
		if _, err := io.Copy(h, r); err != nil {
			return err
		}
		c.out.WriteString(hex.EncodeToString(h.Sum(nil)) + "  " + name + "\n")
		return nil
	})
}
