package shell

// Runaways of timeout, patch, cmp, expr, bc and fold (see runaway_test.go).
func init() {
	runaways["bc"] = []string{`yes '1+1' | bc > /dev/null`, `echo '2^1000000000' | bc`}
	runaways["cmp"] = []string{`cmp /dev/zero /dev/zero`, `cmp sparse sparse`, `cmp -l /dev/zero sparse > /dev/null`}
	runaways["expr"] = []string{`while :; do expr 1 + 1; done > /dev/null`}
	runaways["fold"] = []string{`fold -w 3 /dev/zero > /dev/null`, `yes | fold -w 1 > /dev/null`, `fold sparse > /dev/null`}
	runaways["patch"] = []string{`yes | patch -p1`, `patch -i /dev/zero`, `patch -i sparse`}
	runaways["timeout"] = []string{`timeout 1000 sh -c 'while :; do :; done'`, `timeout 0 cat /dev/zero > /dev/null`, `timeout 1h yes > /dev/null`}
}
