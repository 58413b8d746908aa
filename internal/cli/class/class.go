// Package class holds `idemctl class` (list, set): each operation class's
// retention, money contract and re-drive, set under four eyes where they count.
package class

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/textfit"
	"github.com/idemctl/idemctl/reconcile"
	"github.com/idemctl/idemctl/redrive"
)

// NewCmdClass builds `idemctl class` (list, set): the purge policy of each
// operation class.
func NewCmdClass(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "class <command>",
		Short: "Show and set the purge policy of operation classes (list, set)",
		Long: `Every operation class has a retention policy that says what an inbox purge of it
needs (idemctl horizon):

  forever  money. The default, and demo.transfer's. A purge needs --contract, a
           business contract reference that is recorded with the plan; its
           tombstones are never dropped.
  horizon  a projection that can be rebuilt whole: purged once the replay
           horizon is proven.

--min-age is a floor: nothing younger is ever purged, whatever --before says.

--money declares that a class moves money and where its amount is in the
payload; displays then total amounts per currency, and accept-as-new of it
needs a second person. Every change is recorded in the audit log.`,
		Example: `  idemctl class list
  idemctl class set reporting.daily_totals --retention horizon --min-age 30d`,
	}
	cmd.AddCommand(NewCmdClassList(f, nil), NewCmdClassSet(f, nil))
	return cmd
}

// ClassListOptions are the flags of `idemctl class list`.
type ClassListOptions struct {
	IO   *cmdutil.IOStreams
	JSON bool
	f    *cmdutil.Factory
}

// NewCmdClassList builds `idemctl class list`.
func NewCmdClassList(f *cmdutil.Factory, runF func(*ClassListOptions) error) *cobra.Command {
	opts := &ClassListOptions{IO: f.IO, f: f}
	return &cobra.Command{
		Use:   "list",
		Short: "List operation classes with their retention and min-age",
		Long: `List every registered operation class: its retention (forever or horizon), its
min-age floor, and whether its effect is SQL (idem.execute) or application
code. Nothing is written.`,
		Example: `  idemctl class list
  idemctl class list -o json | jq -r 'select(.retention == "horizon") | .class'`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return classListRun(cmd.Context(), opts)
		},
	}
}

func classListRun(ctx context.Context, opts *ClassListOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	classes, err := horizon.ListClasses(ctx, pool)
	if err != nil {
		return err
	}
	if opts.JSON {
		for _, c := range classes {
			if err := cmdutil.PrintJSONLine(opts.IO.Out, c); err != nil {
				return err
			}
		}
		return nil
	}
	rows := make([][]string, 0, len(classes))
	for _, c := range classes {
		effect := "application"
		if c.SQLEffect {
			effect = "sql"
		}
		money := "-"
		if c.Money != nil {
			money = c.Money.String()
		}
		rows = append(rows, []string{c.Name, string(c.Retention), horizon.FormatAge(c.MinAge), effect, money, c.Description})
	}
	if len(rows) == 0 {
		fmt.Fprintln(opts.IO.ErrOut, "no operation classes registered")
		return nil
	}
	return cmdutil.PrintTable(opts.IO.Out, []string{"class", "retention", "min age", "effect", "money", "description"}, rows)
}

// ClassSetOptions are the flags of `idemctl class set`.
type ClassSetOptions struct {
	IO        *cmdutil.IOStreams
	JSON      bool
	Name      string
	Retention horizon.Retention
	// MinAge is nil when --min-age was not given (kept as it is).
	MinAge   *time.Duration
	Operator string
	// Reason is required when a forever class becomes horizon; Yes skips
	// the confirmation asked then.
	Reason string
	Yes    bool
	// Redrive, when set, is the class's new re-drive (ClearRedrive removes
	// it); DownstreamIdempotent goes with it.
	Redrive              *redrive.Config
	ClearRedrive         bool
	DownstreamIdempotent bool
	// MoneySet is true when --money was given; Money is then the
	// declaration (nil: the class moves no money).
	MoneySet bool
	Money    *governance.Money
	// RepeatsSet is true when --payloads-repeat was given; Repeats is then
	// the declaration (idemctl suspects leaves such a class out).
	RepeatsSet bool
	Repeats    bool
	f          *cmdutil.Factory
}

// NewCmdClassSet builds `idemctl class set`.
func NewCmdClassSet(f *cmdutil.Factory, runF func(*ClassSetOptions) error) *cobra.Command {
	opts := &ClassSetOptions{IO: f.IO, f: f}
	var retention, minAge, money, repeats string
	var rd redriveFlags
	cmd := &cobra.Command{
		Use:   "set NAME [--retention forever|horizon] [--min-age DURATION] [--money AMOUNT,CURRENCY,UNIT] [--payloads-repeat yes|no] [--redrive http|nats ...]",
		Short: "Set a class's retention and min-age, its money declaration or its re-drive (audited)",
		Long: `Set the retention of an operation class, and optionally its min-age floor
(30d, 12h, 90m; 0 removes the floor). The change is recorded in the audit log
with the policy before and after. It applies to plans made from now on; a purge
re-reads it and aborts when the class became forever and its plan cites no
contract. Making a forever class (money) horizon lets purges remove it without
a contract: it needs --reason and a confirmation (asked on a terminal, --yes
without one), and it is not applied at once: it plans a change that another
person approves (idemctl change approve ID), which applies it with the min-age
asked for. Lowering or removing the min-age lets purges reach identities the
floor protected: it needs --reason and a confirmation too (--yes without a
terminal) and is planned the same way (raising it applies at once). A login
mapped to no person cannot plan either.

--money /amount,/currency,minor declares that the class moves money: JSON
Pointers to the amount and the currency in the payload, and whether amounts
are in minor units (cents) or major ones. Accept-as-new of a money class then
needs a second person, and approvals show the total per currency. One person
declares it; changing or removing it (--money none) switches those four eyes
off, so it needs --reason and plans a change that another person approves
(idemctl change approve).

--redrive http|nats sets how idemctl resolve re-drives an absent operation of a
class whose effect lives in a service (step 3 of the protocol): an HTTP
endpoint (https; plain http only to loopback, or with --allow-insecure) or a
NATS JetStream subject (a server list nats://a:4222,b:4222 too). The request
carries the operation's own identity (Idempotency-Key and a tenant header;
Nats-Msg-Id derived from it). Every host of the target (each server of a
list) must be on the re-drive allow-list (idemctl redrive allow, by the schema
owner); resolve checks it again before it sends. Credentials are references,
never values, and name only what the person running resolve sets aside:
--header 'Authorization=env:IDEMCTL_REDRIVE_PAYMENTS_TOKEN' (a variable named
IDEMCTL_REDRIVE_...) or file:PATH (a path relative to resolve's
--credential-dir, without ".."). A class is re-driven
only with --downstream-idempotent: its service passes a key derived from the
identity to every downstream call (a payment provider), so that a re-drive
after a crash between that call and its commit cannot charge twice.
--redrive none removes it. Recorded in the audit log with before and after.`,
		Example: `  idemctl class set reporting.daily_totals --retention horizon --min-age 30d
  idemctl class set payments.charge --retention forever
  idemctl class set payments.charge --money /amount,/currency,minor
  idemctl class set payments.charge --money none --reason "moved to the ledger service (CHG-301)"
  idemctl class set reporting.totals --retention horizon --reason "a projection now, rebuilt nightly (CHG-118)"
  idemctl class set reporting.daily_totals --retention horizon --min-age 7d --reason "rebuilt weekly now (CHG-140)"
  idemctl class set payments.charge --redrive http --url https://payments.internal/v1/charges \
      --header 'Authorization=env:IDEMCTL_REDRIVE_PAYMENTS_TOKEN' --timeout 10s --concurrency 8 --downstream-idempotent
  idemctl class set payments.charge --redrive nats --url nats://nats.internal:4222 --subject payments.charge --downstream-idempotent`,
		Args: cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cmdutil.UsageErr("a class name is required (idemctl class list shows them)")
			}
			opts.Name = args[0]
			if err := rd.apply(cmd, opts); err != nil {
				return err
			}
			switch horizon.Retention(retention) {
			case horizon.Forever, horizon.Horizon:
				opts.Retention = horizon.Retention(retention)
			case "":
				if cmd.Flags().Changed("min-age") {
					return cmdutil.UsageErr("--min-age goes with --retention: give the class's retention too (idemctl class list shows it), e.g. --retention horizon --min-age %s", minAge)
				}
				if opts.Redrive == nil && !opts.ClearRedrive && !cmd.Flags().Changed("money") && !cmd.Flags().Changed("payloads-repeat") {
					return cmdutil.UsageErr("--retention, --money, --payloads-repeat or --redrive is required")
				}
			default:
				return cmdutil.UsageErr("--retention must be forever or horizon")
			}
			if cmd.Flags().Changed("min-age") {
				d, err := horizon.ParseDuration(minAge)
				if err != nil {
					return cmdutil.UsageErr("--min-age: %v", err)
				}
				opts.MinAge = &d
			}
			if cmd.Flags().Changed("money") {
				m, err := governance.ParseMoney(money)
				if err != nil {
					return cmdutil.UsageErr("%v", err)
				}
				opts.MoneySet, opts.Money = true, m
			}
			if cmd.Flags().Changed("payloads-repeat") {
				switch repeats {
				case "yes":
					opts.RepeatsSet, opts.Repeats = true, true
				case "no":
					opts.RepeatsSet = true
				default:
					return cmdutil.UsageErr("--payloads-repeat: yes or no")
				}
			}
			opts.Operator = f.Operator()
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return classSetRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&retention, "retention", "", "forever (money: purges need --contract) or horizon")
	cmd.Flags().StringVar(&minAge, "min-age", "", "floor below which nothing is ever purged (30d, 12h; 0 for none)")
	cmd.Flags().StringVar(&money, "money", "", "the class moves money: AMOUNT_POINTER,CURRENCY_POINTER,minor|major (none: it does not)")
	cmd.Flags().StringVar(&repeats, "payloads-repeat", "", "yes: the class's payloads legitimately repeat, idemctl suspects leaves it out unless named (needs --reason); no: it does not")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why (required to make a forever class horizon, to lower its min-age, to change a money declaration, or with --payloads-repeat)")
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "do not ask before making a forever class horizon or lowering its min age")
	rd.register(cmd)
	return cmd
}

func classSetRun(ctx context.Context, opts *ClassSetOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	if opts.Retention != "" && !opts.Yes {
		if err := confirmWeakening(ctx, opts, pool); err != nil {
			return err
		}
	}
	if opts.Retention != "" {
		if err := classRetentionRun(ctx, opts, pool); err != nil {
			return err
		}
	}
	if opts.MoneySet {
		if err := classMoneyRun(ctx, opts, pool); err != nil {
			return err
		}
	}
	if opts.RepeatsSet {
		if err := classRepeatsRun(ctx, opts, pool); err != nil {
			return err
		}
	}
	if opts.Redrive == nil && !opts.ClearRedrive {
		return nil
	}
	rc, err := redrive.Set(ctx, pool, opts.Name, opts.Redrive, opts.DownstreamIdempotent, opts.Operator)
	if err != nil {
		for _, refusal := range []error{redrive.ErrInvalidConfig, redrive.ErrSecret, redrive.ErrHostNotAllowed, idem.ErrUnknownClass} {
			if errors.Is(err, refusal) {
				return cmdutil.WithCode(cmdutil.ExitInvalid, err)
			}
		}
		return err
	}
	if opts.JSON {
		return cmdutil.PrintJSONLine(opts.IO.Out, rc)
	}
	if rc.Redrive == nil {
		say(opts, "class %s: not re-driven", rc.Class)
		return nil
	}
	say(opts, "class %s: re-driven via %s to %s (downstream idempotent: %v)", rc.Class, rc.Redrive.Kind,
		rc.Redrive.Target(), rc.DownstreamIdempotent)
	return nil
}

// classRetentionRun sets the class's retention and min-age, or plans it
// (a forever class made horizon waits for another person).
func classRetentionRun(ctx context.Context, opts *ClassSetOptions, pool *pgxpool.Pool) error {
	pol, change, err := horizon.SetClass(ctx, pool, opts.Name, opts.Retention, opts.MinAge, opts.Operator, opts.Reason)
	if err != nil {
		if errors.Is(err, horizon.ErrUnknownClass) || errors.Is(err, horizon.ErrInvalidPolicy) || errors.Is(err, horizon.ErrInvalidOperator) ||
			errors.Is(err, horizon.ErrNoPerson) {
			return cmdutil.WithCode(cmdutil.ExitInvalid, err)
		}
		return cmdutil.GovernanceErr(err)
	}
	if opts.JSON {
		// The class as it now is, with whether the change applied.
		b, err := json.Marshal(pol)
		if err != nil {
			return err
		}
		out := map[string]any{}
		if err := json.Unmarshal(b, &out); err != nil {
			return err
		}
		out["applied"] = change == 0
		if change != 0 {
			out["change_id"] = change
		}
		return cmdutil.PrintJSONLine(opts.IO.Out, out)
	}
	if change != 0 && pol.Retention == horizon.Forever && opts.Retention == horizon.Horizon {
		say(opts, "class %s: making it horizon is planned as change %d; it stays %s until then", pol.Name, change, pol.Retention)
		// The command to type next on a line of its own, whole.
		fmt.Fprintf(opts.IO.Out, "  another person approves it: idemctl change approve %d\n", change)
		return nil
	}
	if change != 0 {
		act := "removing its min age"
		if opts.MinAge != nil && *opts.MinAge > 0 {
			act = "lowering its min age to " + horizon.FormatAge(*opts.MinAge)
		}
		say(opts, "class %s: %s is planned as change %d; it stays %s (retention %s) until then",
			pol.Name, act, change, horizon.FormatAge(pol.MinAge), pol.Retention)
		fmt.Fprintf(opts.IO.Out, "  another person approves it: idemctl change approve %d\n", change)
		return nil
	}
	say(opts, "class %s: retention %s, min age %s", pol.Name, pol.Retention, horizon.FormatAge(pol.MinAge))
	return nil
}

// say prints one of class set's messages, fitted to the terminal (80
// columns without one): a long class name or target wraps the line, never
// cuts a word.
func say(opts *ClassSetOptions, format string, args ...any) {
	fmt.Fprintln(opts.IO.Out, textfit.Sentence(fmt.Sprintf(format, args...), opts.IO.TextWidth()))
}

// classMoneyRun declares (or plans changing) the class's money.
func classMoneyRun(ctx context.Context, opts *ClassSetOptions, db governance.DBTX) error {
	res, err := governance.SetMoney(ctx, db, opts.Name, opts.Money, opts.Operator, opts.Reason)
	if err != nil {
		return cmdutil.GovernanceErr(err)
	}
	if opts.JSON {
		return cmdutil.PrintJSONLine(opts.IO.Out, res)
	}
	switch {
	case !res.Applied:
		// The command to type next on a line of its own, whole.
		say(opts, "class %s: changing its money declaration is planned as change %d", opts.Name, res.ChangeID)
		fmt.Fprintf(opts.IO.Out, "  another person approves it: idemctl change approve %d\n", res.ChangeID)
	case opts.Money == nil:
		say(opts, "class %s: moves no money", opts.Name)
	default:
		say(opts, "class %s: moves money (amount %s, currency %s, %s units)", opts.Name,
			opts.Money.Amount, opts.Money.Currency, opts.Money.Unit)
	}
	return nil
}

// classRepeatsRun declares whether the class's payloads repeat.
func classRepeatsRun(ctx context.Context, opts *ClassSetOptions, pool *pgxpool.Pool) error {
	before, err := reconcile.DeclareRepeats(ctx, pool, opts.Name, opts.Repeats, opts.Operator, opts.Reason)
	if errors.Is(err, reconcile.ErrUnknownClass) || errors.Is(err, reconcile.ErrRefusedDeclaration) {
		return cmdutil.WithCode(cmdutil.ExitInvalid, err)
	}
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.PrintJSONLine(opts.IO.Out, map[string]any{"class": opts.Name, "payloads_repeat": opts.Repeats, "before": before})
	}
	if opts.Repeats {
		say(opts, "class %s: payloads repeat; idemctl suspects leaves it out unless --class names it", opts.Name)
	} else {
		say(opts, "class %s: payloads do not repeat; idemctl suspects lists it", opts.Name)
	}
	return nil
}

// confirmWeakening asks before the class is made purgeable sooner: a
// forever class (money) made horizon, or its min age lowered or removed
// (both planned, for another person to approve); without a terminal it
// needs --yes.
func confirmWeakening(ctx context.Context, opts *ClassSetOptions, db horizon.DBTX) error {
	cur, err := horizon.GetClass(ctx, db, opts.Name)
	if err != nil {
		return nil // SetClass names an unknown class
	}
	if strings.TrimSpace(opts.Reason) == "" {
		return nil // SetClass refuses it: a reason first
	}
	var what, q string
	switch {
	case cur.Retention == horizon.Forever && opts.Retention == horizon.Horizon:
		what = fmt.Sprintf("class %s is forever (money): making it horizon lets purges remove it without a contract", opts.Name)
		q = fmt.Sprintf("Class %s is forever: purges need a business contract. Plan making it horizon (purgeable on the replay proof alone, once another person approves)?", opts.Name)
	case opts.MinAge != nil && *opts.MinAge < cur.MinAge:
		to := "removing it"
		if *opts.MinAge > 0 {
			to = "lowering it to " + horizon.FormatAge(*opts.MinAge)
		}
		what = fmt.Sprintf("class %s has a min age of %s: %s lets purges reach identities it protected", opts.Name,
			horizon.FormatAge(cur.MinAge), to)
		q = fmt.Sprintf("Class %s: nothing younger than %s is ever purged. Plan %s (once another person approves)?", opts.Name,
			horizon.FormatAge(cur.MinAge), to)
	default:
		return nil
	}
	if err := cmdutil.NeedYes(opts.IO, false, what); err != nil {
		return err
	}
	return cmdutil.Confirm(opts.IO, false, q, "nothing changed")
}
