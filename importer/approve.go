package importer

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/idemctl/idemctl/governance"
)

// checkColumns are the columns of pg_temp.idem_import_check the approver's
// read of the source fills: the run's stage's but the payload, which its
// canonical hash stands for (the seal checked each staged payload against
// its hash).
var checkColumns = []string{"tenant_id", "operation_id", "payload_hash", "response", "created_at", "store_hash", "evidence"}

// Approve is the second person's approval of import plan id, bound to its
// source: in one transaction it reads the source again (open, after the
// plan's --since, in the store's order), classifies and canonicalises it
// as the plan did, copies the rows the plan imports (up to its cursor)
// into a table of the approver's session (idem.import_check_open), and
// calls idem.import_plan_approve, which approves the plan only if those
// rows are exactly the plan's (a staged plan: the seal's own digest of
// them, idem.import_stage_digest; a plan that keeps an item a row: each
// fingerprint). The source must be the plan's (samePlannedSource:
// ErrSourceChanged otherwise): rows equal to the staged ones from another
// source approve nothing. A plan the source does not give is refused
// (ErrRefused, naming its first differing row) and nothing is approved. Streaming: the
// rows go to the database as they are read.
func Approve(ctx context.Context, db TxBeginner, id int64, operator string, open Opener) (governance.EntryPlan, error) {
	tx, rollback, err := beginReading(ctx, db)
	if err != nil {
		return governance.EntryPlan{}, err
	}
	defer rollback()
	plan, err := governance.OneEntry(tx.Query(ctx, "SELECT to_jsonb(p) FROM idem.import_check_open($1) p", id))
	if errors.Is(err, governance.ErrNotFound) {
		return governance.EntryPlan{}, fmt.Errorf("%w: no entry plan %d (idemctl record list shows them)", governance.ErrNotFound, id)
	}
	if err != nil {
		return governance.EntryPlan{}, fmt.Errorf("approve import plan %d: %w", id, err)
	}
	st, err := newStager(ctx, plan)
	if err != nil {
		return governance.EntryPlan{}, err
	}
	src, err := open(ctx, st.since, plan.Staged || plan.ItemsDigest != nil)
	if err != nil {
		return governance.EntryPlan{}, fmt.Errorf("import plan %d: the source cannot be read again: %w; nothing approved", id, err)
	}
	defer src.Close()
	st.src, st.values = src, checkValues
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"pg_temp", "idem_import_check"}, checkColumns, st); err != nil {
		if st.err != nil {
			// the source's error, named: not the idem database's
			return governance.EntryPlan{}, fmt.Errorf("import plan %d: read the source again: %w; nothing approved", id, st.err)
		}
		return governance.EntryPlan{}, fmt.Errorf("import plan %d: read the source again: %w; nothing approved", id, governance.MapError(err))
	}
	if err := samePlannedSource(plan, src); err != nil {
		return governance.EntryPlan{}, fmt.Errorf("import plan %d: %w; nothing approved", id, err)
	}
	p, err := governance.OneEntry(tx.Query(ctx, "SELECT to_jsonb(p) FROM idem.import_plan_approve($1, $2) p", id, operator))
	if err != nil {
		return governance.EntryPlan{}, fmt.Errorf("approve import plan %d: %w", id, err)
	}
	return p, tx.Commit(ctx)
}

// samePlannedSource: src, read to its end, is the source plan was made of,
// not another that happens to give its rows. A file is its content: its
// digest must be the plan's, whatever its path (a copy on the approver's
// machine is the same file). A database is the one the plan names (its
// host, port, database and login, as idemctl describes it; a live store's
// rows after the plan's cursor change its digest, so that is not
// compared). A source of another kind is refused.
func samePlannedSource(plan governance.EntryPlan, src Source) error {
	kind := func(d string) string { k, _, _ := strings.Cut(d, " "); return k }
	if kind(src.Describe()) != kind(plan.Source) {
		return fmt.Errorf("%w: the plan is of %s, the source given is %s", ErrSourceChanged, plan.Source, src.Describe())
	}
	if _, file := src.(*ndjsonSource); file {
		if src.Digest() != plan.SourceDigest {
			return fmt.Errorf("%w: the plan is of %s (digest %s), the file given (%s) has digest %s",
				ErrSourceChanged, plan.Source, plan.SourceDigest, src.Describe(), src.Digest())
		}
		return nil
	}
	if src.Describe() != plan.Source {
		return fmt.Errorf("%w: the plan is of %s, the source given is %s", ErrSourceChanged, plan.Source, src.Describe())
	}
	return nil
}
