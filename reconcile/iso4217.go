package reconcile

import "github.com/idemctl/idemctl/governance"

// isoNoMinorUnit is the exponent of the codes ISO marks "N.A."
// (governance.NoMinorUnit).
const isoNoMinorUnit = governance.NoMinorUnit

// MinorUnits returns the exponent of an ISO 4217 code (upper case) and
// whether the code is an active one. The table lives in package governance,
// which money totals also read.
func MinorUnits(code string) (int, bool) { return governance.MinorUnits(code) }
