package cli

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/internal/health"
	"github.com/idemctl/idemctl/internal/term"
)

// DoctorOptions are the flags of `idemctl doctor`.
type DoctorOptions struct {
	IO          *IOStreams
	JSON        bool
	SkipSources bool
	f           *Factory
}

// NewCmdDoctor builds `idemctl doctor`.
func NewCmdDoctor(f *Factory, runF func(*DoctorOptions) error) *cobra.Command {
	opts := &DoctorOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check, in order, what idemctl needs of this database, and say what to do",
		Long: `Check, in order, one line each with a verdict (ok, warn, fail) and what to do:

  dsn          which database is named, and where the name came from (no password)
  server       the server reached, its version and the login
  primary      a primary in a read-write session, or a standby / read-only session
  replication  the standbys streaming from it, synchronous or not: after the
               promotion of an asynchronous one, "absent" is no proof that an
               operation did not happen
  schema       schema idem at this binary's version (missing, older, newer)
  grants       which kind of user the login is (owner, service, operator,
               auditor), and the schema's privileges compared with the code package
  partitions   daily inbox partitions ahead (idemctl horizon maintain)
  sources      every replay source probed (--skip-sources to leave them)
  audit        the audit chain's head agrees with the log's last row
  quarantine   open quarantine records and the oldest one's age

Nothing is written. Exit code 0 when nothing fails (warnings allowed), 1
otherwise.`,
		Example: `  idemctl doctor
  idemctl doctor --dsn 'service=payments-prod' -o json | jq -r 'select(.verdict != "ok") | .action'`,
		Args: maxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return doctorRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.SkipSources, "skip-sources", false, "do not probe the replay sources")
	return cmd
}

func doctorRun(ctx context.Context, opts *DoctorOptions) error {
	checks := doctorChecks(ctx, opts)
	failed := false
	rows := make([][]string, 0, len(checks))
	for _, c := range checks {
		failed = failed || c.Verdict == health.Fail
		if opts.JSON {
			if err := printJSONLine(opts.IO.Out, c); err != nil {
				return err
			}
			continue
		}
		rows = append(rows, []string{c.Name, string(c.Verdict), c.Detail, orDash(c.Action)})
	}
	if !opts.JSON {
		if err := printDoctorTable(opts.IO, rows); err != nil {
			return err
		}
	}
	if failed {
		return silentExit{ExitFailure}
	}
	return nil
}

// doctorChecks runs the checks; reaching the server is checked here, the
// rest by package health.
func doctorChecks(ctx context.Context, opts *DoctorOptions) []health.Check {
	dsn, source := db.ResolveDSN(opts.f.DSNFlag)
	if err := db.CheckTarget(dsn); err != nil {
		return []health.Check{{Name: "dsn", Verdict: health.Fail, Detail: err.Error(),
			Action: "idemctl --dsn 'postgres://user@primary:5432/db' doctor, or export IDEMCTL_DSN"}}
	}
	checks := []health.Check{{Name: "dsn", Verdict: health.OK, Detail: fmt.Sprintf("%s (from %s)", db.Describe(dsn), source)}}
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return append(checks, health.Check{Name: "server", Verdict: health.Fail, Detail: oneLine(err.Error()),
			Action: "check the host, port, login and password, and that the server is up"})
	}
	st := opts.f.state
	checks = append(checks, health.Check{Name: "server", Verdict: health.OK,
		Detail: fmt.Sprintf("PostgreSQL %s, login %s", strings.Fields(st.ServerVersion + " ")[0], st.User)})
	more, err := health.Doctor(ctx, pool, health.DoctorOptions{ProbeSources: !opts.SkipSources})
	if err != nil {
		return append(checks, health.Check{Name: "primary", Verdict: health.Fail, Detail: oneLine(err.Error())})
	}
	return append(checks, more...)
}

// verdictCell finds a fail or warn verdict in a rendered doctor table (a
// cell of the verdict column, or its line in the vertical layout).
var verdictCell = regexp.MustCompile(`(│ |verdict: +)(fail|warn)\b`)

// printDoctorTable prints the checks; on a terminal that takes colour, a
// fail is red and a warn yellow. The table is escaped as any output is,
// then coloured, then written raw.
func printDoctorTable(ios *IOStreams, rows [][]string) error {
	header := []string{"check", "verdict", "detail", "what to do"}
	if !ios.ColorEnabled() {
		return printTable(ios.Out, header, rows)
	}
	var b strings.Builder
	if err := printTable(&layoutWriter{Writer: term.Writer(&b, false), layout: layoutOf(ios.Out)}, header, rows); err != nil {
		return err
	}
	colored := verdictCell.ReplaceAllStringFunc(b.String(), func(m string) string {
		sub := verdictCell.FindStringSubmatch(m)
		code := "31" // red
		if sub[2] == "warn" {
			code = "33" // yellow
		}
		return sub[1] + "\x1b[" + code + "m" + sub[2] + "\x1b[0m"
	})
	_, err := io.WriteString(ios.RawOut, colored)
	return err
}
