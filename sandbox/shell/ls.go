package shell

import (
	"fmt"
	"io/fs"
	"strconv"
)

// modeString is ls's -rwxr-xr-x.
func modeString(m fs.FileMode) string {
	b := []byte("----------")
	switch {
	case m.IsDir():
		b[0] = 'd'
	case m&fs.ModeSymlink != 0:
		b[0] = 'l'
	case m&fs.ModeNamedPipe != 0:
		b[0] = 'p'
	case m&fs.ModeSocket != 0:
		b[0] = 's'
	case m&fs.ModeCharDevice != 0:
		b[0] = 'c'
	case m&fs.ModeDevice != 0:
		b[0] = 'b'
	}
	const rwx = "rwxrwxrwx"
	for i := 0; i < 9; i++ {
		if m&(1<<(8-i)) != 0 {
			b[i+1] = rwx[i]
		}
	}
	if m&fs.ModeSetuid != 0 {
		b[3] = "Ss"[boolInt(m&0o100 != 0)]
	}
	if m&fs.ModeSetgid != 0 {
		b[6] = "Ss"[boolInt(m&0o010 != 0)]
	}
	if m&fs.ModeSticky != 0 {
		b[9] = "Tt"[boolInt(m&0o001 != 0)]
	}
	return string(b)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// humanSize is the -h form: 1.5K, 23M; rounded up as GNU does.
func humanSize(n int64, ceil bool) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10)
	}
	units := "KMGTPE"
	v := float64(n)
	u := -1
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	if v < 10 {
		r := v * 10
		if ceil {
			r = ceilf(r)
		}
		if r >= 100 {
			return fmt.Sprintf("%d%c", 10, units[u])
		}
		return fmt.Sprintf("%.1f%c", r/10, units[u])
	}
	r := v
	if ceil {
		r = ceilf(r)
	}
	if r >= 1024 && u < len(units)-1 {
		return fmt.Sprintf("1.0%c", units[u+1])
	}
	return fmt.Sprintf("%d%c", int64(r), units[u])
}

func ceilf(v float64) float64 {
	i := float64(int64(v))
	if v > i+1e-9 {
		return i + 1
	}
	return i
}
