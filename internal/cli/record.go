package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/idem"
)

// NewCmdRecord builds `idemctl record` (plan, approve, run): outcomes known
// from outside, recorded by hand through a four-eyes entry plan.
func NewCmdRecord(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "record <command>",
		Short: "Record outcomes known from outside, by hand, with a second person (plan, approve, run)",
		Long: `Record an outcome that happened outside (a charge the provider made that the
service never recorded): each identity enters the inbox with its payload and a
response in the service's own shape, marked as recorded by hand, and its effect
is NOT run; a later retry of it answers already_applied, not a second charge.

One person plans from a file (one JSON object a line: tenant_id, operation_id,
class, payload, response, evidence such as the provider's reference), another
person approves, then it runs. The plan keeps the file's sha256, the counts
and a sample. A money class needs --contract; a class with a SQL effect needs
--correction too (its ledger rows are not written by recording: say who writes
them). At run time an identity that appeared meanwhile is left alone and
reported, and one with a pending claim or an open quarantine record is
refused. idemctl inspect (and --history) shows where an identity came from.`,
		Example: `  idemctl record plan --file charges.ndjson --reason "PSP charged, never recorded (INC-9)" \
      --contract PSP-2024-7 --correction "ledger correction LC-12 by finance ops"
  idemctl record approve 3     # another person
  idemctl record run 3`,
	}
	cmd.AddCommand(newCmdRecordPlan(f), newCmdRecordStep(f, "approve"), newCmdRecordStep(f, "run"))
	return cmd
}

type recordLine struct {
	TenantID    string          `json:"tenant_id"`
	OperationID string          `json:"operation_id"`
	Class       string          `json:"class"`
	Payload     json.RawMessage `json:"payload"`
	Response    json.RawMessage `json:"response"`
	Evidence    string          `json:"evidence"`
}

// readRecordFile reads the items of a record plan and the file's digest.
func readRecordFile(path string) ([]governance.EntryItem, string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, "", usageErr("--file: %v", err)
	}
	var items []governance.EntryItem
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l recordLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, "", withCode(ExitInvalid, fmt.Errorf("%s line %d: %v", path, n, err))
		}
		canon, hash, err := idem.Canonicalize(l.Payload, idem.PayloadLimits{})
		if err != nil {
			return nil, "", withCode(ExitInvalid, fmt.Errorf("%s line %d: payload: %v", path, n, err))
		}
		items = append(items, governance.EntryItem{TenantID: l.TenantID, OperationID: l.OperationID, Class: l.Class,
			Payload: string(canon), PayloadHash: hash, Response: l.Response, Evidence: l.Evidence})
	}
	if err := sc.Err(); err != nil {
		return nil, "", withCode(ExitInvalid, fmt.Errorf("%s: %v", path, err))
	}
	return items, governance.DigestOf(raw), nil
}

func newCmdRecordPlan(f *Factory) *cobra.Command {
	var file string
	var o governance.EntryOptions
	cmd := &cobra.Command{
		Use:   "plan --file FILE --reason TEXT [--contract REF] [--correction REF]",
		Short: "Plan recording outcomes known from outside; nothing enters until another person approves",
		Long:  `Plan recording the identities of FILE (one JSON object a line). Nothing enters until another person approves.`,
		Example: `  idemctl record plan --file charges.ndjson --reason "PSP charged, never recorded (INC-9)" \
      --contract PSP-2024-7 --correction "ledger correction LC-12 by finance ops"`,
		Args: maxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" || o.Reason == "" {
				return usageErr("--file and --reason are required")
			}
			items, digest, err := readRecordFile(file)
			if err != nil {
				return err
			}
			pool, err := f.Pool(cmd.Context())
			if err != nil {
				return err
			}
			o.Kind, o.Source, o.SourceDigest, o.Operator = governance.EntryRecord, file, digest, f.Operator()
			p, err := governance.PlanEntry(cmd.Context(), pool, o, items)
			if err != nil {
				return governanceErr(err)
			}
			if err := showEntry(f, p); err != nil {
				return err
			}
			fmt.Fprintf(f.IO.ErrOut, "nothing entered yet: another person approves it with idemctl record approve %d\n", p.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "the outcomes, one JSON object a line")
	cmd.Flags().StringVar(&o.Reason, "reason", "", "why (required)")
	cmd.Flags().StringVar(&o.Contract, "contract", "", "business contract reference (required for a money class)")
	cmd.Flags().StringVar(&o.Correction, "correction", "", "the manual correction that writes the ledger rows (required for a class with a SQL effect)")
	return cmd
}

func newCmdRecordStep(f *Factory, step string) *cobra.Command {
	short := map[string]string{
		"approve": "Approve a record plan another person made (four eyes)",
		"run":     "Enter an approved record plan's identities, without running their effects",
	}[step]
	return &cobra.Command{
		Use:     step + " ID",
		Short:   short,
		Long:    short + ".",
		Example: "  idemctl record " + step + " 3",
		Args:    maxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args, "a record plan")
			if err != nil {
				return err
			}
			pool, err := f.Pool(cmd.Context())
			if err != nil {
				return err
			}
			do := governance.ApproveEntry
			if step == "run" {
				do = governance.RunEntry
			}
			p, err := do(cmd.Context(), pool, id, f.Operator())
			if err != nil {
				return governanceErr(err)
			}
			return showEntry(f, p)
		},
	}
}

func showEntry(f *Factory, p governance.EntryPlan) error {
	if f.JSON() {
		return printJSONLine(f.IO.Out, p)
	}
	approved := "-"
	if p.ApprovedPerson != nil {
		approved = personLogin(*p.ApprovedPerson, deref(p.ApprovedDBUser))
	}
	rows := [][]string{
		{"plan", strconv.FormatInt(p.ID, 10)},
		{"kind", p.Kind},
		{"state", p.State},
		{"source", p.Source},
		{"digest", p.SourceDigest},
		{"counts", string(p.Counts)},
		{"sample", string(p.Sample)},
		{"reason", p.Reason},
		{"planned by", personLogin(p.PlannedPerson, p.PlannedDBUser)},
		{"approved by", approved},
		{"entered", fmt.Sprintf("%d (%d left alone or refused)", p.Entered, p.LeftAlone)},
	}
	if p.Cursor != nil {
		rows = append(rows, []string{"cursor", *p.Cursor})
	}
	if p.HashFunction != nil {
		rows = append(rows, []string{"hash function", *p.HashFunction})
	}
	return printTable(f.IO.Out, []string{"field", "value"}, rows)
}
