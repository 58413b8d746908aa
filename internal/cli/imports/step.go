package imports

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/importer"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/cli/record"
	"github.com/idemctl/idemctl/internal/db"
)

const approveLong = `Approve an import plan another person made (four eyes), bound to its source.

The approval reads the plan's source again (the same --from-postgres,
--query and --password-env, or the same --from-ndjson file, as the plan),
classifies and canonicalises it as the plan did, and sends the rows the
plan imports (after its --since, up to its cursor) to the database, which
approves the plan only if they are exactly the plan's: off Citus the staged
rows (the same digest, computed by the one function the seal used; the
plan shows it as "items digest"), on Citus each item's fingerprint. A row
that differs, or that one side lacks, refuses the approval (exit code 5,
naming the row), and nothing is approved: abort the plan and plan again.
A source that cannot be read approves nothing either.

On a terminal it shows the plan first and asks; --yes skips the question
and is required without one. A record plan is approved by idemctl record
approve.`

const runLong = `Enter an approved import plan's identities, without running their effects.

Off Citus the plan staged its rows in the database, checked and sealed
there, and its approver's read of the source was compared with them: the
run enters that stage and does not read the source again (no source flag
is needed; one given is not read). What enters is what the approval
checked: a source that changes after the approval changes nothing the run
enters (rows written after the plan's cursor are the next import's
--since). A plan approved before approvals read the source does not run
(exit code 5): abort it and plan again. The rows enter by chunks, each its
own transaction, on two connections. A run that stopped half way has
entered the chunks that committed: run it again to resume (no chunk enters
twice). On Citus the plan keeps a fingerprint of each item and the run
reads the source again (the same --from-postgres, --query and
--password-env, or the same --from-ndjson file, as the plan) and enters the
rows, in one transaction, only if they are exactly the planned items.

The run prints each outcome's count (entered, skipped, quarantined, refused,
conflict_hash_only; with -o json in the plan's object as "outcomes"), names
the rows that did not enter for another reason than being in the inbox
already (refused: a pending claim or an open quarantine record holds the
identity; quarantined: the inbox holds another payload, both sides kept;
conflict_hash_only: a hash-only store's row for an identity the inbox holds
with another request, not entered, the plan's item row keeps the store's
side), and the cursor for the next import's --since. idemctl record show ID
lists the rows that did not enter with their outcomes (-o json too). A
record plan is run by idemctl record run.`

// newCmdImportStep builds `idemctl import approve`, which reads the plan's
// source again, and `idemctl import run`, which reads it again only on
// Citus.
func newCmdImportStep(f *cmdutil.Factory, step string) *cobra.Command {
	var yes bool
	src := &importRunSource{}
	use := step + " ID (--from-postgres DSN --query SQL [--password-env VAR] | --from-ndjson FILE)"
	short, long := "Enter an approved import plan's identities, without running their effects", runLong
	example := `  idemctl import run 4
  # on Citus, with the plan's source:
  export IDEMCTL_SOURCE_RIDES_PASSWORD=...
  idemctl import run 4 --from-postgres "postgres://reader@db1/rides" \
      --password-env IDEMCTL_SOURCE_RIDES_PASSWORD \
      --query "$(cat rides-import.sql)"
  idemctl import run 5 --from-ndjson keys.ndjson`
	if step == "approve" {
		short, long = "Approve an import plan another person made (four eyes), checking it against its source", approveLong
		example = `  export IDEMCTL_SOURCE_RIDES_PASSWORD=...
  idemctl import approve 4 --from-postgres "postgres://reader@db1/rides" \
      --password-env IDEMCTL_SOURCE_RIDES_PASSWORD \
      --query "$(cat rides-import.sql)"
  idemctl import approve 5 --from-ndjson keys.ndjson`
	} else {
		use = step + " ID [--from-postgres DSN --query SQL [--password-env VAR] | --from-ndjson FILE]"
	}
	cmd := &cobra.Command{
		Use:     use,
		Short:   short,
		Long:    long,
		Example: example,
		Args:    cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cmdutil.ParseID(args, "an import plan")
			if err != nil {
				return err
			}
			if err := src.validate(step); err != nil {
				return err
			}
			p, pool, err := record.EntryStep(cmd.Context(), f, governance.EntryImport, step, id, yes, func(ctx context.Context, dbp *pgxpool.Pool) (governance.EntryPlan, error) {
				act := importer.Run
				if step == "approve" {
					act = importer.Approve
				}
				p, err := act(ctx, dbp, id, f.Operator(), src.opener())
				if errors.Is(err, importer.ErrNoSource) {
					return p, cmdutil.WithCode(cmdutil.ExitUsage, err)
				}
				if errors.Is(err, db.ErrConnect) {
					// the source unreachable, as an unreachable database: nothing done
					return p, cmdutil.WithCode(cmdutil.ExitFailure, err)
				}
				if err != nil && !errors.Is(err, governance.ErrNotFound) {
					// a source changed, or a refusal: nothing done
					return p, cmdutil.WithCode(cmdutil.ExitInvalid, err)
				}
				return p, err
			})
			if err != nil {
				return err
			}
			if step == "approve" {
				if err := showImportPlan(f, p); err != nil {
					return err
				}
				fmt.Fprintf(f.IO.ErrOut, "import plan %d approved: the %d rows its source gives are the plan's (items digest %s); idemctl import run %d enters them\n",
					p.ID, p.Items, hexDigest(p.ItemsDigest), p.ID)
				return nil
			}
			if p.Staged && src.given() {
				fmt.Fprintf(f.IO.ErrOut, "import plan %d: the source was not read: the run entered the stage its approval compared with the source\n", p.ID)
			}
			if err := showImportRun(cmd.Context(), f, pool, p); err != nil {
				return err
			}
			return record.RunConflictExit(cmd.Context(), pool, p.ID)
		},
	}
	if step == "approve" {
		cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not show the plan and ask on a terminal")
	}
	fl := cmd.Flags()
	fl.StringVar(&src.FromPostgres, "from-postgres", "", "DSN of the store's database, as planned (no password in it)")
	fl.StringVar(&src.Query, "query", "", "with --from-postgres: the query the plan read")
	fl.StringVar(&src.PasswordEnv, "password-env", "", "with --from-postgres: the environment variable (IDEMCTL_SOURCE_...) holding the password")
	fl.StringVar(&src.FromNDJSON, "from-ndjson", "", "the NDJSON export the plan read")
	return cmd
}

// hexDigest is a plan's items digest ("-" without one), plain hex as
// governance reads it.
func hexDigest(d *string) string {
	if d == nil {
		return "-"
	}
	return *d
}

// importRun is what `idemctl import run -o json` prints: the plan and the
// count of each outcome, as the text says them.
type importRun struct {
	governance.EntryPlan
	Outcomes map[string]int `json:"outcomes"`
}

// showImportRun prints a run's plan and each outcome's count (entered,
// skipped, quarantined, refused, conflict_hash_only), names the rows that
// did not enter, and the cursor for the next --since.
func showImportRun(ctx context.Context, f *cmdutil.Factory, pool *pgxpool.Pool, p governance.EntryPlan) error {
	outcomes, err := importer.Outcomes(ctx, pool, p.ID)
	if err != nil {
		return err
	}
	if f.JSON() {
		if err := cmdutil.PrintJSONLine(f.IO.Out, importRun{EntryPlan: p, Outcomes: outcomes}); err != nil {
			return err
		}
	} else if err := showImportPlan(f, p); err != nil {
		return err
	}
	keys := make([]string, 0, len(outcomes))
	for k, n := range outcomes {
		keys = append(keys, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(keys)
	fmt.Fprintf(f.IO.ErrOut, "outcomes: %s\n", strings.Join(keys, ", "))
	if err := nameNotEntered(ctx, f, pool, p.ID, outcomes); err != nil {
		return err
	}
	if p.Cursor != nil {
		fmt.Fprintf(f.IO.ErrOut, "cursor: %s (the next import takes --since %s)\n", *p.Cursor, *p.Cursor)
	}
	return nil
}

// outcomeMeaning says what each outcome of a row that did not enter means.
var outcomeMeaning = map[string]string{
	"refused":            "a pending claim or an open quarantine record holds the identity",
	"quarantined":        "the inbox holds it with another payload: quarantined with both sides",
	"conflict_hash_only": "the inbox holds it with another request than the store's hash: not entered, the plan's item row keeps the store's side",
}

// nameNotEntered names, on stderr, the rows of a run that did not enter
// for a reason other than being in the inbox already (skipped): up to 10,
// each with its outcome and what it means, then where all are listed.
func nameNotEntered(ctx context.Context, f *cmdutil.Factory, pool *pgxpool.Pool, id int64, outcomes map[string]int) error {
	n := outcomes["refused"] + outcomes["quarantined"] + outcomes["conflict_hash_only"]
	if n == 0 {
		return nil
	}
	r, err := governance.ShowEntry(ctx, pool, id)
	if err != nil {
		return cmdutil.GovernanceErr(err)
	}
	named := 0
	for _, e := range r.Entries {
		meaning, ok := outcomeMeaning[e.Outcome]
		if !ok {
			continue
		}
		if named == 10 {
			break
		}
		fmt.Fprintf(f.IO.ErrOut, "not entered: %s/%s (row %d): %s: %s\n", e.TenantID, e.OperationID, e.Seq, e.Outcome, meaning)
		named++
	}
	fmt.Fprintf(f.IO.ErrOut, "idemctl record show %d lists the rows that did not enter, with their outcomes (-o json too)\n", id)
	return nil
}

// importRunSource is the source `idemctl import approve` reads again, and
// `run` on Citus.
type importRunSource struct {
	FromPostgres, Query, PasswordEnv, FromNDJSON string
}

func (s *importRunSource) given() bool {
	return s.FromPostgres != "" || s.FromNDJSON != "" || s.Query != "" || s.PasswordEnv != ""
}

func (s *importRunSource) validate(step string) error {
	pg, file := s.FromPostgres != "", s.FromNDJSON != ""
	if step == "run" && !s.given() {
		return nil // a staged plan's run reads no source; on Citus importer.Run says it needs one
	}
	if pg == file {
		return cmdutil.UsageErr("the %s reads the plan's source again: give --from-postgres DSN --query SQL, or --from-ndjson FILE",
			map[string]string{"approve": "approval", "run": "run"}[step])
	}
	if pg && s.Query == "" {
		return cmdutil.UsageErr("--from-postgres needs --query")
	}
	if !pg && (s.Query != "" || s.PasswordEnv != "") {
		return cmdutil.UsageErr("--query and --password-env go with --from-postgres")
	}
	return nil
}

func (s *importRunSource) opener() importer.Opener {
	if !s.given() {
		return nil
	}
	if s.FromNDJSON != "" {
		return importer.File(s.FromNDJSON)
	}
	return importer.PostgresSource{DSN: s.FromPostgres, Query: s.Query, PasswordEnv: s.PasswordEnv}.Opener()
}
