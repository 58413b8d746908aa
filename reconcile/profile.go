package reconcile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Profile says how an export of one kind reads: which columns carry the
// identity and the compared fields, in which unit the amounts are, which
// rows are operations, which reverse one, and how the file is written. A
// mapping names a profile (Mapping.Profile, a built-in; ProfileFile, a
// user's) and what it sets itself wins over the profile.
type Profile struct {
	// Name and Description say what export the profile reads.
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	Format      Format `json:"format,omitempty"`
	Delimiter   string `json:"delimiter,omitempty"`
	Key         string `json:"key,omitempty"`
	Compare     string `json:"compare,omitempty"`
	Amount      string `json:"amount,omitempty"`
	Currency    string `json:"currency,omitempty"`
	Rows
}

// builtinProfiles are the exports people reconcile against most.
var builtinProfiles = map[string]Profile{
	"stripe-balance-itemized": {
		Name:        "stripe-balance-itemized",
		Description: "Stripe itemized balance change report (balance_change_from_activity.itemized); the operation id in payment_metadata[operation_id]",
		Format:      FormatCSV,
		Key:         "operation_id=payment_metadata[operation_id]",
		Compare:     "/amount=gross,/currency=currency",
		// A refund's and a dispute's gross is negative: the reversed amount
		// is its absolute value.
		Rows: Rows{AmountUnit: "major", Where: []string{"reporting_category=charge|refund|dispute"},
			KindColumn: "reporting_category", ReversalKinds: []string{"refund", "dispute"},
			ReferenceColumn: "balance_transaction_id"},
	},
	"adyen-settlement": {
		Name:        "adyen-settlement",
		Description: "Adyen settlement details report; the operation id is the Merchant Reference",
		Format:      FormatCSV,
		Key:         "operation_id=Merchant Reference",
		Compare:     "/amount=Gross Credit (GC)|Gross Debit (GC),/currency=Gross Currency",
		Rows: Rows{AmountUnit: "major", Where: []string{"Type=Settled|Refunded|Chargeback"}, KindColumn: "Type",
			ReversalKinds: []string{"Refunded", "Chargeback"}, Negate: []string{"Gross Debit (GC)"},
			ReferenceColumn: "Psp Reference"},
	},
}

// ProfileNames lists the built-in profiles, sorted.
func ProfileNames() []string {
	out := make([]string, 0, len(builtinProfiles))
	for n := range builtinProfiles {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// BuiltinProfile returns a built-in profile by name.
func BuiltinProfile(name string) (Profile, bool) {
	p, ok := builtinProfiles[name]
	return p, ok
}

// LoadProfile reads a profile file: a JSON object with the fields of
// Profile. Unknown fields are refused.
func LoadProfile(path string) (Profile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Profile{}, fmt.Errorf("%w: profile: %v", ErrInvalidMapping, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p Profile
	if err := dec.Decode(&p); err != nil {
		return Profile{}, fmt.Errorf("%w: profile %s: %v", ErrInvalidMapping, path, err)
	}
	if p.Name == "" {
		p.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	return p, nil
}

// withProfile returns m with the profile it names laid under it: what m
// sets wins.
func (m Mapping) withProfile() (Mapping, error) {
	var p Profile
	switch {
	case m.Profile != "" && m.ProfileFile != "":
		return m, fmt.Errorf("give one profile: --profile or --profile-file")
	case m.Profile != "":
		var ok bool
		if p, ok = builtinProfiles[m.Profile]; !ok {
			return m, fmt.Errorf("--profile %q: no such profile (there are: %s)", m.Profile, strings.Join(ProfileNames(), ", "))
		}
	case m.ProfileFile != "":
		var err error
		if p, err = LoadProfile(m.ProfileFile); err != nil {
			return m, err
		}
	default:
		return m, nil
	}
	str := func(dst *string, v string) {
		if *dst == "" {
			*dst = v
		}
	}
	str((*string)(&m.Format), string(p.Format))
	str(&m.Delimiter, p.Delimiter)
	str(&m.DecimalSeparator, p.DecimalSeparator)
	str(&m.Key, p.Key)
	str(&m.Compare, p.Compare)
	str(&m.Amount, p.Amount)
	str(&m.Currency, p.Currency)
	str(&m.AmountUnit, p.AmountUnit)
	str(&m.KindColumn, p.KindColumn)
	str(&m.ReferenceColumn, p.ReferenceColumn)
	if m.Where == nil {
		m.Where = p.Where
	}
	if m.ReversalKinds == nil {
		m.ReversalKinds = p.ReversalKinds
	}
	if m.Negate == nil {
		m.Negate = p.Negate
	}
	if len(p.MinorUnits) > 0 {
		mu := map[string]int{}
		for k, v := range p.MinorUnits {
			mu[strings.ToUpper(k)] = v
		}
		for k, v := range m.MinorUnits {
			mu[strings.ToUpper(k)] = v
		}
		m.MinorUnits = mu
	}
	return m, nil
}
