package shell

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

func init() {
	register(&command{names: []string{"cat"}, run: cmdCat, opts: opts("nbsETAveut", "number", "number-nonblank", "squeeze-blank", "show-ends", "show-tabs", "show-all"), ignored: []string{"v"}})
}

func cmdCat(c *cmd) int {
	opts, files, ok := c.flags()
	if !ok {
		return 1
	}
	var number, nonblank, squeeze, ends, tabs bool
	for _, o := range opts {
		switch o.name {
		case "n", "number":
			number = true
		case "b", "number-nonblank":
			nonblank = true
		case "s", "squeeze-blank":
			squeeze = true
		case "E", "show-ends":
			ends = true
		case "T", "show-tabs":
			tabs = true
		case "A", "show-all":
			ends, tabs = true, true
		case "e":
			ends = true
		case "t":
			tabs = true
		}
	}
	plain := !number && !nonblank && !squeeze && !ends && !tabs
	line := 0
	prevBlank := false
	return c.eachInput(files, func(name string, r io.Reader) error {
		if plain {
			c.out.Flush()
			_, err := io.Copy(c.out, r)
			return err
		}
		br := bufio.NewReader(r)
		for {
			s, err := c.readLine(br)
			if s == "" && err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
			body, nl := strings.CutSuffix(s, "\n")
			blank := body == ""
			if squeeze && blank && prevBlank {
				continue
			}
			prevBlank = blank
			if nonblank && !blank || number && !nonblank {
				line++
				fmt.Fprintf(c.out, "%6d\t", line)
			}
			if tabs {
				body = strings.ReplaceAll(body, "\t", "^I")
			}
			c.out.WriteString(body)
			if nl {
				if ends {
					c.out.WriteByte('$')
				}
				c.out.WriteByte('\n')
			}
		}
	})
}
