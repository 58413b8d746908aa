// Package doctor holds `idemctl doctor` (what is wrong with this database and
// idemctl's use of it) and `idemctl status` (its numbers, for a person or Prometheus).
package doctor

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/internal/cli/audit"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/internal/health"
	"github.com/idemctl/idemctl/internal/term"
	"github.com/idemctl/idemctl/migrations"
)

// DoctorOptions are the flags of `idemctl doctor`.
type DoctorOptions struct {
	IO          *cmdutil.IOStreams
	JSON        bool
	SkipSources bool
	// AnchorFile and AnchorMaxAge: the audit anchor audit verify keeps, and
	// how old it may be before doctor warns.
	AnchorFile   string
	AnchorMaxAge time.Duration
	f            *cmdutil.Factory
}

// NewCmdDoctor builds `idemctl doctor`.
func NewCmdDoctor(f *cmdutil.Factory, runF func(*DoctorOptions) error) *cobra.Command {
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
  anchor       idemctl audit verify kept an anchor for this database (in
               --anchor-file, as audit verify finds it) no older than
               --anchor-max-age: without one, a rewrite of the whole log by
               its owner or a superuser goes unseen
  effects      every registered SQL effect still passes its registration's
               checks (one changed since does not run: IX016)
  quarantine   open quarantine records and the oldest one's age
  failover     the classes kept for ever commit with a synchronous standby
               (without one, an operation acknowledged here can be lost in a
               failover), and when the primary last switched timeline

Nothing is written. Exit code 0 when nothing fails (warnings allowed), 1
otherwise.`,
		Example: `  idemctl doctor
  idemctl doctor --dsn 'service=payments-prod' -o json | jq -r 'select(.verdict != "ok") | .action'`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return doctorRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.SkipSources, "skip-sources", false, "do not probe the replay sources")
	cmd.Flags().StringVar(&opts.AnchorFile, "anchor-file", "", "the audit anchor file (default as audit verify finds it)")
	cmd.Flags().DurationVar(&opts.AnchorMaxAge, "anchor-max-age", 7*24*time.Hour, "warn when the audit anchor is older than this")
	return cmd
}

func doctorRun(ctx context.Context, opts *DoctorOptions) error {
	checks := doctorChecks(ctx, opts)
	failed := false
	rows := make([][]string, 0, len(checks))
	for _, c := range checks {
		failed = failed || c.Verdict == health.Fail
		if opts.JSON {
			if err := cmdutil.PrintJSONLine(opts.IO.Out, c); err != nil {
				return err
			}
			continue
		}
		rows = append(rows, []string{c.Name, string(c.Verdict), c.Detail, cmdutil.OrDash(c.Action)})
	}
	if !opts.JSON {
		if err := printDoctorTable(opts.IO, rows); err != nil {
			return err
		}
	}
	if failed {
		return cmdutil.SilentExit{Code: cmdutil.ExitFailure}
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
	if _, err := pgx.ParseConfig(dsn); err != nil {
		// pgx's message quotes the DSN; say only that it does not parse.
		return []health.Check{{Name: "dsn", Verdict: health.Fail, Detail: fmt.Sprintf("the DSN (from %s) cannot be parsed", source),
			Action: "give a URL (postgres://user@host:5432/db) or key=value pairs (host=... dbname=...); idemctl never prints a DSN's password"}}
	}
	checks := []health.Check{{Name: "dsn", Verdict: health.OK, Detail: fmt.Sprintf("%s (from %s)", db.Describe(dsn), source)}}
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return append(checks, health.Check{Name: "server", Verdict: health.Fail, Detail: cmdutil.OneLine(err.Error()),
			Action: "check the host, port, login and password, and that the server is up"})
	}
	st := opts.f.State()
	checks = append(checks, health.Check{Name: "server", Verdict: health.OK,
		Detail: fmt.Sprintf("PostgreSQL %s, login %s", strings.Fields(st.ServerVersion + " ")[0], st.User)})
	more, err := health.Doctor(ctx, pool, health.DoctorOptions{ProbeSources: !opts.SkipSources})
	if err != nil {
		return append(checks, health.Check{Name: "primary", Verdict: health.Fail, Detail: cmdutil.OneLine(err.Error())})
	}
	checks = append(checks, more...)
	// After the audit chain's own check, when there is one (a schema).
	for i, c := range checks {
		if c.Name == "audit" {
			more := []health.Check{anchorCheck(ctx, opts, pool, time.Now()), effectsCheck(ctx, pool)}
			return append(checks[:i+1], append(more, checks[i+1:]...)...)
		}
	}
	return checks
}

// effectsCheck re-checks every registered SQL effect: one that drifted since
// its registration does not run.
func effectsCheck(ctx context.Context, pool *pgxpool.Pool) health.Check {
	c := health.Check{Name: "effects"}
	drifted, err := migrations.DriftedEffects(ctx, pool)
	switch {
	case err != nil:
		c.Verdict, c.Detail = health.Warn, "cannot check (an operator or auditor login can): "+cmdutil.OneLine(err.Error())
	case len(drifted) > 0:
		lines := make([]string, len(drifted))
		for i, d := range drifted {
			lines[i] = d.String()
		}
		c.Verdict, c.Detail = health.Fail, strings.Join(lines, "; ")
		c.Action = "idem.execute refuses these (IX016): undo the change to the effect or its owner, or register the class again once it passes"
	default:
		c.Verdict, c.Detail = health.OK, "every registered effect passes its registration's checks"
	}
	return c
}

// anchorCheck says whether audit verify keeps an anchor for this database,
// and how old it is.
func anchorCheck(ctx context.Context, opts *DoctorOptions, pool *pgxpool.Pool, now time.Time) health.Check {
	c := health.Check{Name: "anchor", Verdict: health.Warn, Action: "idemctl audit verify (it keeps the anchor; keep a copy of the file elsewhere too)"}
	store, err := audit.OpenAnchors(opts.AnchorFile)
	if err != nil {
		c.Detail = cmdutil.OneLine(err.Error())
		return c
	}
	key, legacy, err := audit.AnchorKey(ctx, pool)
	if err != nil {
		c.Detail = cmdutil.OneLine(err.Error())
		return c
	}
	kept, keptUnder, err := audit.LoadAnchor(store, key, legacy)
	switch {
	case err != nil:
		c.Verdict, c.Detail = health.Fail, cmdutil.OneLine(err.Error())
		c.Action = "look at the file (it may be the evidence of a rewrite), then move it aside or chmod 600 it"
	case kept == nil:
		c.Detail = fmt.Sprintf("no audit anchor kept for %s in %s: a rewrite of the whole log would go unseen", key, store.Path)
	case keptUnder != "":
		// found at the database's address under another identity (or none):
		// the database was stamped again, or is another one made there
		c.Detail = fmt.Sprintf("the audit anchor (row %d) in %s was kept for %q, not for %q: the database at this address now says another identity",
			kept.ID, store.Path, keptUnder, key)
		c.Action = "idemctl audit verify compares the log with it and says what moved; if this is another database made at the same address, move that entry aside first"
	case now.Sub(kept.VerifiedAt) > opts.AnchorMaxAge:
		c.Detail = fmt.Sprintf("the audit anchor (row %d) was kept %s ago, more than %s", kept.ID, now.Sub(kept.VerifiedAt).Round(time.Minute), opts.AnchorMaxAge)
	default:
		c.Verdict, c.Action = health.OK, ""
		c.Detail = fmt.Sprintf("row %d verified %s ago (%s)", kept.ID, now.Sub(kept.VerifiedAt).Round(time.Second), store.Path)
	}
	return c
}

// verdictCell finds a fail or warn verdict in a rendered doctor table (a
// cell of the verdict column, or its line in the vertical layout).
var verdictCell = regexp.MustCompile(`(│ |verdict: +)(fail|warn)\b`)

// printDoctorTable prints the checks; on a terminal that takes colour, a
// fail is red and a warn yellow. The table is escaped as any output is,
// then coloured, then written raw.
func printDoctorTable(ios *cmdutil.IOStreams, rows [][]string) error {
	header := []string{"check", "verdict", "detail", "what to do"}
	if !ios.ColorEnabled() {
		return cmdutil.PrintTable(ios.Out, header, rows)
	}
	var b strings.Builder
	if err := cmdutil.PrintTable(&cmdutil.LayoutWriter{Writer: term.Writer(&b, false), Layout: cmdutil.LayoutOf(ios.Out)}, header, rows); err != nil {
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
