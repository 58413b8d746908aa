// Package build holds what the build stamps into the binary: the release
// version and, for builds without a VCS stamp, the commit (make build sets
// both with -ldflags "-X github.com/idemctl/idemctl/internal/build.Version=...").
package build

// Version is set at build time with -ldflags "-X .../internal/build.Version=...".
var Version = "dev"

// Commit is set at build time (make build: -ldflags "-X .../internal/build.Commit=...")
// for builds whose Go build information has no VCS stamp (a git worktree).
var Commit = ""
