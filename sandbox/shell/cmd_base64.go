package shell

import (
	"encoding/base64"
	"io"
	"strconv"
	"strings"
)

func init() {
	register(&command{names: []string{"base64"}, run: cmdBase64, opts: opts("dw:i", "decode", "wrap=", "ignore-garbage"), ignored: []string{"i", "ignore-garbage"}})
}

func cmdBase64(c *cmd) int {
	opts, files, ok := c.flags()
	if !ok {
		return 1
	}
	decode, wrap := false, 76
	for _, o := range opts {
		switch o.name {
		case "d", "decode":
			decode = true
		case "w", "wrap":
			n, err := strconv.Atoi(o.val)
			if err != nil || n < 0 {
				c.errorf("invalid wrap size: '%s'", o.val)
				return 1
			}
			wrap = n
		}
	}
	if len(files) > 1 {
		c.errorf("extra operand '%s'", files[1])
		return 1
	}
	return c.eachInput(files, func(name string, r io.Reader) error {
		data, err := c.readAll(r)
		if err != nil {
			return err
		}
		if decode {
			clean := strings.Map(func(r rune) rune {
				if r == '\n' || r == '\r' || r == ' ' {
					return -1
				}
				return r
			}, string(data))
			out, err := base64.StdEncoding.DecodeString(clean)
			c.out.Write(out)
			if err != nil {
				c.out.Flush()
				c.errorf("invalid input")
				return errSilent
			}
			return nil
		}
		enc := base64.StdEncoding.EncodeToString(data)
		if wrap == 0 { // no line breaks at all, the last included
			c.out.WriteString(enc)
			return nil
		}
		for len(enc) > wrap {
			c.out.WriteString(enc[:wrap] + "\n")
			enc = enc[wrap:]
		}
		if enc != "" {
			c.out.WriteString(enc + "\n")
		}
		return nil
	})
}
