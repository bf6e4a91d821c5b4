package shell

import (
	"crypto/rand"
	"strings"
	"syscall"
)

func init() {
	register(&command{names: []string{"mktemp"}, run: cmdMktemp, opts: opts("dqup:t", "directory", "quiet", "dry-run", "tmpdir?", "suffix=")})
}

func cmdMktemp(c *cmd) int {
	opts, args, ok := c.flags()
	if !ok {
		return 1
	}
	dir, isDir, dry, useTmp, suffix := "", false, false, false, ""
	for _, o := range opts {
		switch o.name {
		case "d", "directory":
			isDir = true
		case "u", "dry-run":
			dry = true
		case "p", "tmpdir":
			dir = o.val
			useTmp = true
		case "t":
			useTmp = true
		case "suffix":
			suffix = o.val
		}
	}
	template := "tmp.XXXXXXXXXX"
	if len(args) > 0 {
		template = args[0]
	} else {
		useTmp = true
	}
	if useTmp && dir == "" {
		dir = c.getenv("TMPDIR")
		if dir == "" {
			dir = tmpRoot
		}
	}
	n := len(template) - len(strings.TrimRight(template, "X"))
	if n < 3 {
		c.errorf("too few X's in template '%s'", template)
		return 1
	}
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	for try := 0; try < 100; try++ {
		b := make([]byte, n)
		rand.Read(b)
		for i := range b {
			b[i] = letters[int(b[i])%len(letters)]
		}
		name := template[:len(template)-n] + string(b) + suffix
		if dir != "" {
			name = strings.TrimSuffix(dir, "/") + "/" + name
		}
		abs := c.abs(name)
		if dry {
			c.out.WriteString(name + "\n")
			return 0
		}
		var err error
		if isDir {
			err = c.r.sh.ns.mkdir(abs, 0o700)
		} else {
			var f vfile
			f, err = c.r.sh.ns.open(abs, O_WRONLY|O_CREATE|O_EXCL, 0o600, nil, nil, nil)
			if err == nil {
				f.Close()
			}
		}
		if errno(err) == syscall.EEXIST {
			continue
		}
		if err != nil {
			c.errorf("failed to create %s via template '%s': %s", map[bool]string{true: "directory", false: "file"}[isDir], name, errText(err))
			return 1
		}
		c.out.WriteString(name + "\n")
		return 0
	}
	return 1
}
