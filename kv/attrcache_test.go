package kv

import (
	"sync"
	"testing"
)

// TestAttrCacheUnderConcurrentWrites: readers that fill the attribute cache
// while writers change the same inodes never see an older value after a
// newer one, and never leave the cache holding an older value than the
// store (checkInvariants compares every cached entry).
func TestAttrCacheUnderConcurrentWrites(t *testing.T) {
	s := newStore(t)
	s.attrs = newAttrCache(1) // readers miss, and fill, all the time
	var inos []uint64
	for _, name := range []string{"a", "b"} {
		inos = append(inos, mkfile(t, s, RootIno, name).Ino)
	}
	rounds := 20000
	if testing.Short() || raceEnabled {
		rounds = 3000
	}
	var readers sync.WaitGroup
	stop := make(chan struct{})
	for range 3 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			seen := make([]uint64, len(inos)) // sizes only grow
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i, ino := range inos {
					a, err := s.GetAttr(ino)
					if err != nil {
						t.Error(err)
						return
					}
					if a.Size < seen[i] {
						t.Errorf("inode %d: read size %d after %d: a stale cached value", ino, a.Size, seen[i])
						return
					}
					seen[i] = a.Size
				}
			}
		}()
	}
	var writers sync.WaitGroup
	for _, ino := range inos {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range rounds {
				if _, err := s.Write(ino, int64(i), []byte{'x'}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	checkInvariants(t, s, checkOpts{})
}
