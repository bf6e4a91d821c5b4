// Package gitnet is how go-git reaches http(s) remotes in the daemon: the
// default client, except that a redirect is checked against what the
// request's context allows (WithRedirectCheck). The git-clone tool
// clones from the hosts its policy lists; without this, one of them
// could send the clone on to any host the daemon reaches (a cloud's
// metadata service, a service on the host's loopback).
package gitnet

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

type checkKey struct{}

// WithRedirectCheck returns a context under which go-git follows a
// redirect only to a URL that check accepts; its error is the clone's.
func WithRedirectCheck(ctx context.Context, check func(*url.URL) error) context.Context {
	return context.WithValue(ctx, checkKey{}, check)
}

func checkRedirect(req *http.Request, via []*http.Request) error {
	check, _ := req.Context().Value(checkKey{}).(func(*url.URL) error)
	if check == nil {
		return nil
	}
	if err := check(req.URL); err != nil {
		return &RedirectError{URL: req.URL.Redacted(), Err: err}
	}
	return nil
}

// RedirectError is a redirect the context's check refused.
type RedirectError struct {
	URL string
	Err error
}

func (e *RedirectError) Error() string { return "redirect to " + e.URL + " refused: " + e.Err.Error() }
func (e *RedirectError) Unwrap() error { return e.Err }

// ErrRefused is what a check returns for a URL it does not allow, if it
// has nothing better to say.
var ErrRefused = errors.New("not an allowed host")

func init() {
	c := githttp.NewClient(&http.Client{Transport: http.DefaultTransport, CheckRedirect: checkRedirect})
	client.InstallProtocol("https", c)
	client.InstallProtocol("http", c)
}
