package shell

func init() {
	register(cmdSort, "sort")
	register(cmdUniq, "uniq")
	register(cmdCut, "cut")
	register(cmdTr, "tr")
	register(cmdComm, "comm")
	register(cmdPaste, "paste")
	register(cmdBase64, "base64")
	register(cmdHash, "md5sum", "sha1sum", "sha256sum", "sha512sum")
	register(cmdXargs, "xargs")
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }
