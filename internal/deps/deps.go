//go:build deps

// Package deps pins modules that work in progress will import, so that
// `go mod tidy` keeps them while that code is being written. Delete an
// import here once a real package imports it.
package deps

import (
	_ "github.com/aws/aws-sdk-go-v2/config"
	_ "github.com/aws/aws-sdk-go-v2/service/s3"
	_ "github.com/go-git/go-git/v5"
	_ "github.com/moby/profiles/seccomp"
	_ "github.com/opencontainers/runc/libcontainer"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/sync/errgroup"
	_ "golang.org/x/term"
)
