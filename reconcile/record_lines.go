package reconcile

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/idemctl/idemctl/internal/term"
)

// RecordNote is the note of every line --emit-record writes: what the line
// holds, and what a person must check before planning it.
const RecordNote = "built from the report: the payload holds only the compared fields and the response stands in for the service's; " +
	"make both the service's own before idemctl record plan if its clients read them (a retry whose payload differs is a conflict, quarantined, never a second charge)"

// RecordLine is one line of `idemctl record plan --file`: an operation the
// report settled and the inbox never recorded (missing_in_inbox), to be
// recorded by hand through a four-eyes plan, never directly. Evidence names
// the report (file, SHA-256, line) and the provider's reference and amount.
type RecordLine struct {
	TenantID    string          `json:"tenant_id"`
	OperationID string          `json:"operation_id"`
	Class       string          `json:"class"`
	Payload     json.RawMessage `json:"payload"`
	Response    json.RawMessage `json:"response"`
	Evidence    string          `json:"evidence"`
	Note        string          `json:"note"`
}

// maxEvidenceBytes is the longest evidence an entry plan takes.
const maxEvidenceBytes = 1024

// recordLine builds the record plan line of a missing_in_inbox finding from
// its report line: the payload from the compared fields (the amount in minor
// units, the currency upper case), the report's evidence, and a stand-in
// response that says where it comes from.
func (p *plan) recordLine(f Finding, rec *record, rep ReportInfo) (RecordLine, error) {
	payload := map[string]any{}
	for i, fl := range p.fields {
		v := rec.values[i]
		if v == "" {
			continue
		}
		if i == p.currency {
			v = strings.ToUpper(v)
		}
		setAt(payload, fl.tokens, jsonScalar(v))
	}
	ref := ""
	if p.refSlot >= 0 {
		ref = rec.values[len(p.fields)]
	}
	amount, currency := "", ""
	if p.amount >= 0 {
		amount = rec.values[p.amount]
	}
	if p.currency >= 0 {
		currency = strings.ToUpper(rec.values[p.currency])
	}
	evidence := fmt.Sprintf("provider report %s sha256:%s line %d", rep.Name, rep.SHA256, rec.line)
	if ref != "" {
		evidence += ": provider reference " + ref
	}
	if amount != "" {
		evidence += fmt.Sprintf(", %s %s (minor units)", amount, currency)
	}
	evidence = truncate(strings.Join(strings.Fields(term.Escape(evidence)), " "), maxEvidenceBytes)
	response := map[string]any{"recorded_from": "provider report", "report": rep.Name, "report_sha256": rep.SHA256,
		"line": rec.line}
	if ref != "" {
		response["provider_reference"] = ref
	}
	if amount != "" {
		response["amount"], response["currency"] = jsonScalar(amount), currency
	}
	pb, err := json.Marshal(payload)
	if err != nil {
		return RecordLine{}, fmt.Errorf("record line %s/%s: %w", f.Tenant, f.OperationID, err)
	}
	rb, err := json.Marshal(response)
	if err != nil {
		return RecordLine{}, fmt.Errorf("record line %s/%s: %w", f.Tenant, f.OperationID, err)
	}
	return RecordLine{TenantID: f.Tenant, OperationID: f.OperationID, Class: f.Class, Payload: pb, Response: rb,
		Evidence: evidence, Note: RecordNote}, nil
}

// jsonScalar is a report value as JSON: a number when it is one, else a
// string.
func jsonScalar(v string) any {
	if v != "" && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) && json.Valid([]byte(v)) {
		return json.Number(v)
	}
	return v
}

// setAt sets the value at a JSON Pointer's tokens in doc, making the
// objects on the way.
func setAt(doc map[string]any, tokens []string, v any) {
	for _, t := range tokens[:len(tokens)-1] {
		next, ok := doc[t].(map[string]any)
		if !ok {
			next = map[string]any{}
			doc[t] = next
		}
		doc = next
	}
	doc[tokens[len(tokens)-1]] = v
}
