package fs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/computerfs/computerfs/internal/testmount"
)

// TestTools runs the tools people use on a workspace (tar, cp -a, rsync,
// find, du, git) on the mount and on tmpfs, and compares what they see:
// the same tree must give the same answers.
func TestTools(t *testing.T) {
	requireRoot(t)
	for _, tool := range []string{"tar", "rsync", "git", "du", "find", "cp", "getfattr"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (.ci/run installs it)", tool)
		}
	}
	m := testmount.Start(t, filepath.Join(t.TempDir(), "store"))
	ref := tmpfsTwin(t)
	// A source tree with the things tools care about: modes, symlinks,
	// hard links, xattrs, nested directories, an empty file, a sparse file.
	src := filepath.Join(t.TempDir(), "src")
	sh(t, filepath.Dir(src), `mkdir -p src/a/b/c src/empty && cd src &&
		printf 'hello\n' > a/hello.txt && chmod 640 a/hello.txt &&
		seq 1 20000 > a/b/numbers && ln a/b/numbers a/b/numbers.link &&
		ln -s ../hello.txt a/b/hello.link && : > a/b/c/empty &&
		truncate -s 10M a/sparse && printf x | dd of=a/sparse bs=1 seek=5000000 conv=notrunc status=none &&
		chmod 4755 a/b/c && setfattr -n user.origin -v test a/hello.txt &&
		touch -d '2001-02-03 04:05:06.123456789' a/hello.txt`)

	for _, root := range []string{m.Dir, ref} {
		sh(t, root, "tar -C "+filepath.Dir(src)+" -cf - src | tar -xpf - && mv src from-tar")
		sh(t, root, "cp -a "+src+" from-cp")
		sh(t, root, "rsync -aHX "+src+"/ from-rsync/")
	}
	// What each tool reports must match between the mount and tmpfs.
	queries := map[string]string{
		// Directory sizes are the file system's own business (tmpfs counts
		// entries, ext4 blocks): compare them for non-directories only.
		"find":     `find from-tar from-cp from-rsync \( -type d -printf '%p %y %m %n %U:%G\n' \) -o -printf '%p %y %m %n %s %U:%G %l\n' | sort`,
		"mtimes":   `find from-tar from-cp from-rsync ! -type l ! -type d -printf '%p %T@\n' | sort`,
		"content":  `find from-tar from-cp from-rsync -type f -exec md5sum {} + | sort`,
		"xattrs":   `getfattr -d -m user. -R from-tar from-cp from-rsync 2>/dev/null | sort`,
		"du-bytes": `find from-tar from-cp from-rsync ! -type d -print0 | du -b --apparent-size --files0-from=- | sort`,
		"tar-list": `tar -cf - from-tar | tar -tvf - | awk '{print $1, $3, $NF}' | sort`,
	}
	for name, q := range queries {
		got, want := sh(t, m.Dir, q), sh(t, ref, q)
		if got != want {
			t.Errorf("%s differs between the mount and tmpfs:\nmount:\n%s\ntmpfs:\n%s", name, got, want)
		}
	}
	// du on disk blocks: the sparse file must stay sparse on the mount.
	if kb := sh(t, m.Dir, "du -k from-cp/a/sparse | cut -f1"); kb == "" || len(kb) > 3 {
		t.Errorf("du of a 10 MiB sparse file on the mount: %s KiB, want a few", kb)
	}

	// git: a repository made and changed on the mount behaves as one on tmpfs.
	git := `git init -q -b main repo && cd repo && cp -a ` + src + `/. . &&
		git add -A && git -c user.name=t -c user.email=t@e commit -q -m first &&
		echo change >> a/hello.txt && git mv a/b/numbers a/b/renamed && rm a/b/c/empty &&
		git status --porcelain && git diff --stat | tail -1 &&
		git -c user.name=t -c user.email=t@e commit -qam second && git log --oneline | wc -l && git fsck --strict 2>&1`
	if got, want := sh(t, m.Dir, git), sh(t, ref, git); got != want {
		t.Errorf("git differs:\nmount:\n%s\ntmpfs:\n%s", got, want)
	}
	// git clone from the mount to the mount.
	sh(t, m.Dir, "git clone -q repo clone && cd clone && git status --porcelain")
	if _, err := os.Stat(filepath.Join(m.Dir, "clone/a/b/renamed")); err != nil {
		t.Errorf("clone: %v", err)
	}
	if out := sh(t, m.Dir, "diff -r --no-dereference from-tar from-rsync && echo same"); !strings.HasSuffix(out, "same") {
		t.Errorf("tar and rsync copies differ on the mount: %s", out)
	}
}
