package reconcile

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// normalizeAmount checks a line's amount and, when the plan reads major
// units, converts it to minor units with its currency's exponent (ISO 4217,
// or the profile's override). A decimal comma is read where the plan says
// so. It returns why the line is invalid, "" when it is not.
func (p *plan) normalizeAmount(rec *record) string {
	col := p.fields[p.amount].Column
	v := rec.values[p.amount]
	if p.decimalComma && strings.Count(v, ",") == 1 && !strings.Contains(v, ".") {
		v = strings.Replace(v, ",", ".", 1)
	}
	if !isDecimal(v) {
		return fmt.Sprintf("%s is not a number: %q (amounts are plain decimals: 1250, 12.50)", col, rec.values[p.amount])
	}
	rec.values[p.amount] = v
	if !p.major {
		return ""
	}
	code := p.upper.of(rec.values[p.currency])
	exp, ok := p.MinorUnits[code]
	if !ok {
		if exp, ok = MinorUnits(code); !ok {
			return fmt.Sprintf("%s: %q is not an ISO 4217 currency code", p.fields[p.currency].Column, rec.values[p.currency])
		}
	}
	if exp == isoNoMinorUnit {
		return fmt.Sprintf("%s: %s has no minor unit (not a currency a payment settles in)", p.fields[p.currency].Column, code)
	}
	minor, ok := toMinor(v, exp)
	if !ok {
		return fmt.Sprintf("%s %s %s has more decimals than %s allows (%d)", col, v, code, code, exp)
	}
	rec.values[p.amount] = minor
	return ""
}

// upperCodes upper-cases currency codes without an allocation per line:
// a code already in upper case is itself, another one is upper-cased once
// and remembered (up to maxUpperCodes of them). Not safe for concurrent use.
type upperCodes map[string]string

const maxUpperCodes = 1024

func (u *upperCodes) of(s string) string {
	lower := false
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'a' && c <= 'z' {
			lower = true
			break
		}
		if s[i] >= 0x80 {
			return strings.ToUpper(s)
		}
	}
	if !lower {
		return s
	}
	if v, ok := (*u)[s]; ok {
		return v
	}
	v := strings.ToUpper(s)
	if *u == nil {
		*u = upperCodes{}
	}
	if len(*u) < maxUpperCodes {
		(*u)[s] = v
	}
	return v
}

// toMinor converts a decimal in major units to an integer in minor units
// (10^exp of them to the unit); false when it has more decimals than that.
func toMinor(v string, exp int) (string, bool) {
	if u, scale, ok := smallDecimal(v); ok && scale <= exp && exp-scale <= 6 {
		// The common case without math/big: 12.50 -> 1250.
		f := int64(1)
		for i := scale; i < exp; i++ {
			f *= 10
		}
		if m := u * f; m/f == u {
			return strconv.FormatInt(m, 10), true
		}
	}
	r, ok := new(big.Rat).SetString(v)
	if !ok {
		return "", false
	}
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(exp)), nil)))
	if !r.IsInt() {
		return "", false
	}
	return r.Num().String(), true
}
