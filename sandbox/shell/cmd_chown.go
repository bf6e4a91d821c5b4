package shell

// chown and chgrp do nothing: an agent's files are its own, never root's,
// whatever it asks.
func init() {
	register(&command{names: []string{"chown", "chgrp"}, run: cmdTrueish, opts: opts("Rfvch", "recursive", "silent", "quiet",
		"verbose", "changes", "no-dereference", "dereference", "from=", "reference=", "preserve-root", "no-preserve-root")})
}
