package reconcile

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestIsDecimal(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"1250": true, "-12.50": true, "+.5": true, "5.": true, "1e3": true, "1.5E-2": true,
		"": false, "-": false, ".": false, "1,250": false, "12,50": false, "1e": false, "1e12345": false,
		"0x10": false, "1/2": false, " 1": false, "1.2.3": false, "NaN": false, "Inf": false,
	} {
		assert.Equal(t, want, isDecimal(s), s)
	}
}

func TestEqualValue(t *testing.T) {
	t.Parallel()
	num := func(s string) jsonValue { return jsonValue{text: s, kind: '0'} }
	str := func(s string) jsonValue { return jsonValue{text: s, kind: '"'} }
	assert.True(t, equalValue(num("1250"), "1250.00"))
	assert.True(t, equalValue(num("1250"), "1.25e3"))
	assert.False(t, equalValue(num("1250"), "1251"))
	assert.False(t, equalValue(num("1250"), "1,250"))
	assert.True(t, equalValue(str("EUR"), "EUR"))
	assert.False(t, equalValue(str("EUR"), "eur"))
	assert.False(t, equalValue(str("10"), "10.0"), "a stored string compares exactly")
}

// Sums are exact: minor units, decimals of several scales, exponents, and
// per-scale sums that overflow an int64.
func TestTotals(t *testing.T) {
	t.Parallel()
	var tot totals
	for _, a := range []string{"1250", "0.10", "0.2", "1e2", "-5"} {
		tot.add(Matched, side{amount: a, currency: "EUR"}, false)
	}
	for i := 0; i < 3; i++ {
		tot.add(Matched, side{amount: "9223372036854775807", currency: "USD"}, true)
	}
	for i := 0; i < 11; i++ {
		tot.add(Matched, side{amount: "900000000000000000", currency: "GBP"}, true)
	}
	tot.add(Matched, side{amount: "oops", currency: "USD"}, true)
	got := tot.amounts()
	assert.Equal(t, Totals{Inbox: "1345.30"}, got[Matched]["EUR"])
	assert.Equal(t, Totals{Report: "27670116110564327421"}, got[Matched]["USD"])
	assert.Equal(t, Totals{Report: "9900000000000000000"}, got[Matched]["GBP"])
}
