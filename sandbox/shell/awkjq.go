package shell

func init() {
	register(cmdAwk, "awk", "gawk", "mawk", "nawk")
	register(cmdJq, "jq")
}
