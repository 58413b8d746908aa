package governance

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Totals add exactly, per currency, by the declaration's pointers and unit;
// a payload whose amount or currency cannot be read is named.
func TestTotalsByDeclaration(t *testing.T) {
	t.Parallel()
	minor := &Money{Amount: "/amount", Currency: "/currency", Unit: Minor}
	major := &Money{Amount: "/money/value", Currency: "/money/ccy", Unit: Major}
	var tot Totals
	tot.Add("a", minor, []byte(`{"amount":123450,"currency":"EUR"}`))
	tot.Add("b", minor, []byte(`{"amount":5,"currency":"eur"}`))
	tot.Add("c", major, []byte(`{"money":{"value":0.1,"ccy":"EUR"}}`))
	tot.Add("d", major, []byte(`{"money":{"value":"0.2","ccy":"EUR"}}`))
	tot.Add("e", minor, []byte(`{"amount":1500,"currency":"JPY"}`))
	tot.Add("f", minor, []byte(`{"amount":1234,"currency":"KWD"}`))
	tot.Add("g", major, []byte(`{"money":{"value":-3.005,"ccy":"USD"}}`))
	tot.Add("none", nil, []byte(`{}`))
	tot.Add("h", minor, []byte(`{"currency":"EUR"}`))
	tot.Add("i", minor, []byte(`{"amount":"ten","currency":"EUR"}`))
	tot.Add("j", minor, []byte(`{"amount":12.5,"currency":"EUR"}`))
	tot.Add("k", minor, []byte(`{"amount":1,"currency":"XXX"}`))
	tot.Add("l", minor, []byte(`{"amount":1}`))
	tot.Add("m", minor, []byte(`{"amount":true,"currency":"EUR"}`))
	tot.Add("n", minor, []byte(`{"amount":50000000,"currency":"GBP"}`))
	tot.Add("o", minor, []byte(`{"amount":-50000000,"currency":"GBP"}`))
	tot.Add("p", minor, []byte(`{"amount":100,"currency":"GBP"}`))
	assert.Equal(t, []Total{
		{Currency: "EUR", Amount: "1234.85", Records: 4},
		{Currency: "GBP", Amount: "1.00", Records: 3, Negative: "-500000.00", NegativeRecords: 1},
		{Currency: "JPY", Amount: "1500", Records: 1},
		{Currency: "KWD", Amount: "1.234", Records: 1},
		{Currency: "USD", Amount: "-3.005", Records: 1},
	}, tot.List())
	assert.Equal(t, "EUR 1,234.85 over 4 records", tot.List()[0].String())
	assert.Equal(t, "USD -3.005 over 1 record", tot.List()[4].String(), "all negative: the sum hides nothing")
	// A net total can hide a large amount behind a negative one: said.
	assert.Equal(t, "GBP 1.00 net over 3 records (1 negative: -500,000.00; the others 500,001.00)", tot.List()[1].String())
	require.Len(t, tot.Problems, 6)
	var refs []string
	for _, p := range tot.Problems {
		refs = append(refs, p.Ref)
	}
	assert.Equal(t, []string{"h", "i", "j", "k", "l", "m"}, refs)
	assert.Equal(t, "h: no amount at /amount: not in the totals", tot.Problems[0].String())
	assert.Contains(t, tot.Problems[1].Problem, "not a number")
	assert.Contains(t, tot.Problems[2].Problem, "not a whole number of minor units")
	assert.Contains(t, tot.Problems[3].Problem, "not an ISO 4217 currency")
}

func TestGroupThousands(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"0.00": "0.00", "999": "999", "1000": "1,000", "-1234567.5": "-1,234,567.5", "123456": "123,456"} {
		assert.Equal(t, want, groupThousands(in), in)
	}
}
