package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/computerfs/computerfs"
	"github.com/computerfs/computerfs/hibernate"
)

// s3Flags are the flags that say how to reach an image.
type s3Flags struct {
	endpoint, region *string
	pathStyle        *bool
	ttl              *time.Duration
	imageKey         *string
}

func addS3Flags(fset interface {
	String(string, string, string) *string
	Bool(string, bool, string) *bool
	Duration(string, time.Duration, string) *time.Duration
}) s3Flags {
	return s3Flags{
		endpoint:  fset.String("endpoint", "", "URL of an S3-compatible server (default: AWS); credentials come from the AWS_* variables or ~/.aws"),
		region:    fset.String("region", "", "the bucket's region (default: the SDK's environment, else us-east-1)"),
		pathStyle: fset.Bool("path-style", false, "path-style addressing (always for an endpoint that is an IP address or localhost)"),
		imageKey:  fset.String("image-key", "", "the file of the key that signs images (default $COMPUTERFS_IMAGE_KEY, else "+hibernate.DefaultKeyFile+"; hibernate makes it if there is none): resume refuses an image it did not sign, so hosts that resume each other's workspaces share it"),
		ttl:       fset.Duration("lease-ttl", hibernate.DefaultLeaseTTL, "how long the workspace's lease lasts unless renewed (the daemon renews it every third): a host that died holding it keeps it that long"),
	}
}

func (f s3Flags) where(url string) computerfs.Where {
	return computerfs.Where{URL: url, Endpoint: *f.endpoint, Region: *f.region, PathStyle: *f.pathStyle, ImageKey: *f.imageKey}
}

func cmdHibernate(args []string, stdout, stderr io.Writer) error {
	fset := newFlags("hibernate")
	mount := fset.String("w", "", "the workspace's mount point: unmounted first")
	store := fset.String("store", "", "the store directory, if not mounted (a hibernate that failed is run again this way)")
	to := fset.String("to", "", "where the image goes, s3://BUCKET/PREFIX (default: where the store last hibernated to or resumed from)")
	keep := fset.Bool("keep-local", false, "keep the store directory (default: removed once the image is written)")
	timeout := fset.Duration("timeout", 30*time.Second, "how long to wait for the daemon to close the store")
	s3f := addS3Flags(fset)
	pos, err := parse(fset, args, stdout)
	if err != nil {
		return err
	}
	if err := needArgs(pos); err != nil {
		return err
	}
	if (*mount == "") == (*store == "") {
		return usageErr("give -w MOUNTPOINT or --store DIR")
	}
	if *to != "" {
		if _, err := hibernate.ParseURL(*to); err != nil {
			return usageErr("--to %s", err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log, _ := newLogger(stderr, "warn", "text")
	st, err := computerfs.Hibernate(ctx, computerfs.HibernateOptions{
		Mountpoint: *mount, UnmountTimeout: *timeout, Store: *store, To: s3f.where(*to),
		KeepLocal: *keep, LeaseTTL: *s3f.ttl, Logger: log,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "hibernated: %d files, %s; uploaded %s in %d objects (of %d); deleted %d chunks of the previous image\n", st.Files, mib(st.Bytes), mib(st.Moved), st.MovedObjects, st.Objects, st.Deleted)
	if st.DeleteErr != nil {
		fmt.Fprintf(stderr, "computerfs hibernate: warning: the image is whole, but deleting chunks it no longer needs failed: %v\n", st.DeleteErr)
	}
	return nil
}

// resumeOwn are resume's flags that take a value; every other flag is
// mount's.
var resumeOwn = map[string]bool{"endpoint": true, "region": true, "lease-ttl": true, "image-key": true}

func cmdResume(args []string, stdout, stderr io.Writer) error {
	fset := newFlags("resume")
	s3f := addS3Flags(fset)
	rollback := fset.Bool("allow-rollback", false, "resume the image even if it is older than one this host wrote or resumed there, or than the one the workspace's lease names (refused otherwise: an older image put back in the bucket); for an operator who put it back on purpose")
	eager := fset.Bool("eager", false, "download the whole image before mounting (default: the blobs, the data of big files, are fetched after the mount, in the background and first when a program needs one)")
	var own, rest []string
	url := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case a == "-h" || a == "-help" || a == "--help":
			lookup("resume").help(stdout, fset)
			return errHelpShown
		case strings.HasPrefix(a, "-") && resumeOwn[name]:
			own = append(own, a)
			if !hasValue && i+1 < len(args) {
				i++
				own = append(own, args[i])
			}
		case strings.HasPrefix(a, "-") && (name == "path-style" || name == "eager" || name == "allow-rollback"):
			own = append(own, a)
		case url == "" && strings.HasPrefix(a, "s3://"):
			url = a
		default:
			rest = append(rest, a)
		}
	}
	if _, err := parse(fset, own, stdout); err != nil {
		return err
	}
	if url == "" {
		return usageErr("missing s3://BUCKET/PREFIX")
	}
	if _, err := hibernate.ParseURL(url); err != nil {
		return usageErr("%s", err)
	}
	store := flagValue(rest, "store")
	if store == "" {
		return usageErr("missing --store DIR")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	log, _ := newLogger(stderr, "warn", "text")
	st, err := computerfs.ResumeStore(ctx, computerfs.ResumeOptions{From: s3f.where(url), Store: store, LeaseTTL: *s3f.ttl, Eager: *eager, AllowRollback: *rollback, Logger: log})
	stop()
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "resumed: %d files, %s; downloaded %s in %d objects", st.Files, mib(st.Bytes), mib(st.Moved), st.MovedObjects)
	if !*eager && st.Moved < st.Bytes {
		fmt.Fprint(stderr, "; the blobs follow in the background")
	}
	fmt.Fprintln(stderr)
	return cmdMount(rest, stdout, stderr)
}

// flagValue returns the value of flag name in args ("--name V" or
// "--name=V"), or "".
func flagValue(args []string, name string) string {
	for i, a := range args {
		switch {
		case a == "-"+name || a == "--"+name:
			if i+1 < len(args) {
				return args[i+1]
			}
		case strings.HasPrefix(a, "--"+name+"=") || strings.HasPrefix(a, "-"+name+"="):
			_, v, _ := strings.Cut(a, "=")
			return v
		}
	}
	return ""
}
