package kv

import (
	"sync"
	"syscall"
	"testing"
)

// Forget deletes an orphan while other operations on the same inode (a
// write, a truncate, an xattr) may still be running; such an operation read
// the attributes before the deletion and must not write them back after it,
// which would resurrect the inode as a nameless, non-orphan inode that is
// never deleted and is not counted.
func TestForgetRacesInodeOperations(t *testing.T) {
	s := newStore(t)
	s.SetInUse(func(uint64) bool { return true })
	rounds := 300
	if testing.Short() {
		rounds = 50
	}
	var resurrected int
	for i := 0; i < rounds; i++ {
		f := mkfile(t, s, RootIno, "f")
		must0(t, s.Unlink(RootIno, "f"))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := 0; w < 3; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for j := 0; j < 20; j++ {
					var err error
					switch (w + j) % 3 {
					case 0:
						_, err = s.Write(f.Ino, int64(j), []byte("x"))
					case 1:
						_, err = s.SetAttr(f.Ino, SetAttrRequest{Valid: SetSize, Size: uint64(j)})
					case 2:
						err = s.SetXattr(f.Ino, "user.x", []byte("v"), 0)
					}
					if err != nil && Errno(err) != syscall.ENOENT {
						t.Errorf("operation on a forgotten orphan: %v", err)
					}
				}
			}()
		}
		close(start)
		must0(t, s.Forget(f.Ino))
		wg.Wait()
		if _, err := s.GetAttr(f.Ino); err == nil {
			resurrected++
		}
	}
	if resurrected > 0 {
		t.Errorf("%d of %d forgotten orphans came back after a racing write, truncate or setxattr", resurrected, rounds)
	}
	checkInvariants(t, s, checkOpts{})
}
