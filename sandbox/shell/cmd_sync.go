package shell

// sync: the workspace's writes are the store's already.
func init() {
	register(&command{names: []string{"sync"}, run: cmdTrueish, opts: opts("")})
}
