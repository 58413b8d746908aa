package reconcile

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A record plan line: the payload from the compared fields (nested
// pointers, numbers as numbers, the currency upper case), the evidence from
// the report row; without a reference column, none is claimed.
func TestRecordLine(t *testing.T) {
	m := Mapping{Class: "demo.transfer", Report: "x.csv", Key: "tenant=merchant,operation_id=ref",
		Compare: "/amount=amount,/currency=ccy,/payee/iban=iban,/memo=memo", Rows: Rows{ReferenceColumn: "psp"}, withReference: true}
	p, err := m.compile(time.Now())
	require.NoError(t, err)
	rep := ReportInfo{Name: "x.csv", SHA256: strings.Repeat("ab", 32)}
	rec := &record{tenant: "acme", op: "x-1", line: 7, values: []string{"1250", "eur", "DE89 3704", "007", "psp_9\x1b[2J"}}
	l, err := p.recordLine(Finding{Tenant: "acme", OperationID: "x-1", Class: "demo.transfer"}, rec, rep)
	require.NoError(t, err)
	assert.JSONEq(t, `{"amount":1250,"currency":"EUR","payee":{"iban":"DE89 3704"},"memo":"007"}`, string(l.Payload))
	assert.Equal(t, "provider report x.csv sha256:"+rep.SHA256+` line 7: provider reference psp_9\x1b[2J, 1250 EUR (minor units)`, l.Evidence)
	var resp map[string]any
	require.NoError(t, json.Unmarshal(l.Response, &resp))
	assert.Equal(t, "psp_9\x1b[2J", resp["provider_reference"])

	m.withReference = false
	p, err = m.compile(time.Now())
	require.NoError(t, err)
	l, err = p.recordLine(Finding{Tenant: "acme", OperationID: "x-1"}, &record{line: 7, values: []string{"1250", "eur", "", "x"}}, rep)
	require.NoError(t, err)
	assert.NotContains(t, l.Evidence, "provider reference")
	assert.JSONEq(t, `{"amount":1250,"currency":"EUR","memo":"x"}`, string(l.Payload))
}
