// Package hash holds `idemctl hash`: the canonical hash (RFC 8785, SHA-256)
// of a payload, as idem.execute computes it.
package hash

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

// HashOptions are the flags of `idemctl hash`.
type HashOptions struct {
	IO        *cmdutil.IOStreams
	JSON      bool
	Source    string // file path, or "-" for stdin
	Canonical bool
	Limits    idem.PayloadLimits
}

// NewCmdHash builds `idemctl hash`.
func NewCmdHash(f *cmdutil.Factory, runF func(*HashOptions) error) *cobra.Command {
	opts := &HashOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "hash [FILE|-]",
		Short: "Print the canonical hash (jcs-sha256) of a JSON payload",
		Long: `Canonicalise a JSON payload (RFC 8785) and print its SHA-256 as
jcs-sha256:<64 hex>, the form idem.execute expects. Key order, whitespace and
escapes do not change the hash; a different value does.

Refused, with exit code 5 and nothing printed on stdout: invalid JSON, duplicate
keys, invalid UTF-8, lone surrogates, numbers that canonicalisation would change
(9007199254740993, 0.30000000000000001: send such values as strings), payloads
over --max-bytes, nesting deeper than --max-depth.

--canonical prints the canonical bytes themselves. Into a pipe or a file they
are exactly the bytes whose SHA-256 is the hash (no newline added, U+007F and
other characters a terminal would act on left raw, as RFC 8785 keeps them); on
a terminal such characters are shown escaped and a newline ends the line.`,
		Example: `  idemctl hash payload.json
  echo '{"amount": 100, "currency": "EUR"}' | idemctl hash
  idemctl hash --canonical payload.json > payload.canonical.json
  idemctl hash --canonical payload.json | sha256sum   # the hash's 64 hex digits`,
		Args: cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Source = "-"
			if len(args) == 1 {
				opts.Source = args[0]
			}
			if opts.Limits.MaxBytes < 0 || opts.Limits.MaxDepth < 0 {
				return cmdutil.UsageErr("--max-bytes and --max-depth must be positive")
			}
			opts.JSON = f.Output == "json"
			if runF != nil {
				return runF(opts)
			}
			return hashRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Canonical, "canonical", false, "print the canonical bytes instead of the hash")
	cmd.Flags().IntVar(&opts.Limits.MaxBytes, "max-bytes", idem.DefaultMaxPayloadBytes, "largest payload accepted, in bytes")
	cmd.Flags().IntVar(&opts.Limits.MaxDepth, "max-depth", idem.DefaultMaxDepth, "deepest nesting accepted")
	return cmd
}

func hashRun(_ context.Context, opts *HashOptions) error {
	var r io.Reader = opts.IO.In
	if opts.Source != "-" {
		file, err := os.Open(opts.Source)
		if err != nil {
			return cmdutil.FileErr("read payload: %w", err)
		}
		defer file.Close()
		r = file
	}
	raw, err := cmdutil.ReadLimited(r, opts.Limits.MaxBytes)
	if err != nil {
		return cmdutil.WithCode(cmdutil.ExitInvalid, err)
	}
	canonical, hash, err := idem.Canonicalize(raw, opts.Limits)
	if err != nil {
		return cmdutil.WithCode(cmdutil.ExitInvalid, err)
	}
	switch {
	case opts.Canonical && opts.IO.IsStdoutTTY():
		_, err = opts.IO.Out.Write(append(canonical, '\n'))
	case opts.Canonical:
		// The exact bytes hashed: escaping or a newline would change them.
		_, err = opts.IO.RawOut.Write(canonical)
	case opts.JSON:
		err = cmdutil.PrintJSONLine(opts.IO.Out, map[string]any{"hash": hash, "bytes": len(raw), "canonical_bytes": len(canonical)})
	default:
		_, err = fmt.Fprintln(opts.IO.Out, hash)
	}
	return err
}
