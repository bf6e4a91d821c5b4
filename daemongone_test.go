package computerfs

import "testing"

func TestDaemonGoneErrorMessage(t *testing.T) {
	for _, tc := range []struct {
		e    DaemonGoneError
		want string
	}{
		{DaemonGoneError{Mountpoint: "/mnt/ws", Store: "/srv/ws", Pid: 42},
			"the daemon for /mnt/ws, pid 42, is gone: run computerfs mount --store /srv/ws /mnt/ws"},
		{DaemonGoneError{Mountpoint: "/mnt/ws", Store: "/srv/ws"},
			"the daemon for /mnt/ws is gone: run computerfs mount --store /srv/ws /mnt/ws"},
		{DaemonGoneError{Mountpoint: "/mnt/my ws", Store: "/srv/it's", Pid: 7},
			`the daemon for /mnt/my ws, pid 7, is gone: run computerfs mount --store '/srv/it'\''s' '/mnt/my ws'`},
		{DaemonGoneError{Mountpoint: "/mnt/ws", Store: "/srv/ws", Pid: 42, Running: true},
			"the daemon for /mnt/ws, pid 42, does not answer on its control socket: if it is not ending, unmount the workspace and run computerfs mount --store /srv/ws /mnt/ws"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%+v:\n got %s\nwant %s", tc.e, got, tc.want)
		}
	}
}
