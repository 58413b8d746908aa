package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/internal/build"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/migrations"
)

// versionInfo is what `idemctl version` prints.
type versionInfo struct {
	Version       string `json:"version"`
	Commit        string `json:"commit"`
	Modified      bool   `json:"modified"`
	Go            string `json:"go"`
	SchemaVersion int    `json:"schema_version"`
	CodeVersion   int    `json:"code_version"`
}

func currentVersion() versionInfo {
	v := versionInfo{Version: build.Version, Commit: "unknown", Go: runtime.Version(),
		SchemaVersion: migrations.SchemaVersion(), CodeVersion: migrations.CodeVersion}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Commit == "unknown" && build.Commit != "" {
		v.Commit = build.Commit
	}
	return v
}

// NewCmdVersion builds `idemctl version`.
func NewCmdVersion(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print idemctl's version, commit, Go version and the schema it needs",
		Long: `Print the version, the commit it was built from, the Go version, and the
schema version and code package this binary installs and expects (idemctl
migrate installs them; other commands refuse a database at another version).
It never connects.`,
		Example: `  idemctl version
  idemctl version -o json`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			v := currentVersion()
			if f.JSON() {
				return cmdutil.PrintJSONLine(f.IO.Out, v)
			}
			commit := v.Commit
			if v.Modified {
				commit += " (modified)"
			}
			_, err := fmt.Fprintf(f.IO.Out, "idemctl %s\ncommit %s\n%s\nschema %03d, code package %d\n",
				v.Version, commit, v.Go, v.SchemaVersion, v.CodeVersion)
			return err
		},
	}
}
