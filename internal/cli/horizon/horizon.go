// Package horizon holds `idemctl horizon`: replay sources, the check that a
// horizon is closed, and the purge plan from proof to approval to purge.
package horizon

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

// NewCmdHorizon builds `idemctl horizon` and its subcommands.
func NewCmdHorizon(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "horizon <command>",
		Short: "Purge the inbox only behind a proven replay horizon (sources, check, plan, approve, purge, status)",
		Long: `An inbox that is never cleaned grows without bound; one cleaned by age alone
charges twice when a DLQ, an archive or a manual correction replays an
operation whose identity was deleted. idemctl purges only what a recorded proof
covers:

  1. sources   every place that could still replay: postgres (outbox/DLQ
               tables), archive (NDJSON files), nats and kafka DLQs, and the
               built-in manual source (idemctl corrections). Each proves closure
               by bounding (its oldest message is newer than the cutoff plus a
               margin) or by enumerating (the identities it lists are pinned,
               never purged). A probe that fails, times out or returns nonsense
               proves nothing (fail closed).
  2. check     probe every source, print the evidence and the safe cutoff.
  3. plan      record the proof and the plan (cutoff, candidates, pins).
  4. approve   by another operator (four-eyes).
  5. purge     re-probe; abort with nothing deleted if anything changed; else
               remove the set in bounded transactions, resumable.

A purged identity leaves a tombstone (tenant, operation, payload hash, class,
plan, time; no payload, no response): a late replay of it is answered "purged"
(same payload) or quarantined as a conflict, and never runs again.

Times come from the primary's clock. --before takes an RFC 3339 time or a
duration ago (30d, 12h).`,
		Example: `  idemctl horizon source add payments-dlq --kind postgres --source-dsn "$DLQ_DSN" \
      --query "SELECT min(failed_at) FROM dlq.payments"
  idemctl horizon check --class reporting.daily_totals --before 30d
  idemctl horizon plan --class reporting.daily_totals --before 30d -o json
  idemctl horizon approve 12 --operator bob
  idemctl horizon purge 12 --yes
  idemctl horizon status`,
	}
	cmd.AddCommand(
		NewCmdHorizonSource(f),
		NewCmdHorizonCheck(f, nil),
		NewCmdHorizonPlan(f, nil),
		NewCmdHorizonApprove(f, nil),
		NewCmdHorizonCancel(f),
		NewCmdHorizonPurge(f, nil),
		NewCmdHorizonStatus(f, nil),
		NewCmdHorizonMaintain(f, nil),
	)
	return cmd
}

// horizonErr maps the horizon package's refusals to exit codes.
func horizonErr(err error) error {
	if err == nil {
		return nil
	}
	for _, refusal := range []error{horizon.ErrNotProven, horizon.ErrUnboundedHorizon, horizon.ErrContractRequired, horizon.ErrForeverTombstones,
		horizon.ErrSameOperator, horizon.ErrPlanState, horizon.ErrPlanNotFound, horizon.ErrUnknownClass,
		horizon.ErrInvalidPolicy, horizon.ErrInvalidSource, horizon.ErrSourceExists, horizon.ErrSourceNotFound,
		horizon.ErrNoPerson, horizon.ErrInsideMargin, horizon.ErrPlanExpired, horizon.ErrEnteredAfterPlan, horizon.ErrPurgeRunning, horizon.ErrInvalidOperator,
		horizon.ErrSecretInConfig, horizon.ErrInvalidCorrection, horizon.ErrCorrectionNotFound} {
		if errors.Is(err, refusal) {
			return cmdutil.WithCode(cmdutil.ExitInvalid, err)
		}
	}
	return err
}
