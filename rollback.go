package computerfs

import (
	"errors"
	"log/slog"

	"github.com/computerfs/computerfs/kv"
)

// RollbackInfo describes a rollback (kv.RollbackInfo): the snapshot and
// the sequence number of its journal record.
type RollbackInfo = kv.RollbackInfo

// ErrRollbackMounted refuses a rollback of a mounted workspace, which is
// not built yet: unmount it, roll the store back, mount it again.
var ErrRollbackMounted = errors.New("rollback of a mounted workspace is not supported yet: unmount it, then computerfs rollback --store DIR NAME")

// RollbackStore puts the store in dir, which must not be mounted, back to
// its snapshot name (kv.Rollback): the files become the snapshot's, while
// the journal goes on with a rollback record that sync back takes as a
// change anywhere in the workspace, and the audit, the spec, the sync
// state, the agent identity and the snapshots stay the store's.
func RollbackStore(dir, name string, log *slog.Logger) (RollbackInfo, error) {
	if log == nil {
		log = slog.Default()
	}
	if err := checkExisting(dir); err != nil {
		return RollbackInfo{}, err
	}
	info, err := kv.Rollback(dir, name, kv.Options{Logger: log, MinFree: -1, Ballast: -1})
	if err != nil {
		return RollbackInfo{}, mountedHint(dir, err)
	}
	log.Info("rolled back", "store", dir, "snapshot", name, "seq", info.Seq)
	return info, nil
}
