package governance

import "strings"

// The minor-unit exponents of ISO 4217 currencies, transcribed from ISO 4217
// List One (the active codes, "list-one.xml" of the maintenance agency, SIX
// Financial Information) as in force on 2026-12-01. No Go module carrying
// the ISO list (rather than CLDR's, which differs: IQD, LAK, ...) was
// available to depend on. Codes withdrawn before that edition (HRK, ...)
// are not codes here. A provider that writes a currency with another
// exponent (HUF, TWD, ISK, UGX are the usual ones) is declared per currency
// in the profile (minor_units), not edited here.
//
// Cross-checked on 2026-12-01 against github.com/govalues/money v0.2.4
// (scripts/currency/currency_data.csv, the only Go module in reach that
// carries ISO exponents rather than CLDR's): every code both lists hold has
// the same exponent, except ISK (ISO: 0; that module: 2). That module is
// behind the ISO list (it still has GWP, HRK, SLL, ZWL; it lacks SLE, VED,
// XCG, ZWG, the funds codes BOV CHE CHW CLF COU MXV USN UYI UYW, and SVC),
// which is why it is not a dependency. Codes in transition are kept while
// settlements may still carry them: ANG beside its successor XCG, BGN after
// Bulgaria's move to the euro.

// NoMinorUnit is the exponent of the codes ISO marks "N.A." (precious
// metals, SDR, test and "no currency" codes): not amounts of money in a
// settlement, so an amount in one is invalid in major units.
const NoMinorUnit = -1

// iso4217 maps every active code to its exponent. Codes not listed with 0,
// 3, 4 or N.A. below have 2.
var iso4217 = func() map[string]int {
	m := map[string]int{}
	two := `AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BMD BND BOB BOV BRL BSD BTN BWP BYN BZD
CAD CDF CHE CHF CHW CNY COP COU CRC CUP CVE CZK DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD
GTQ GYD HKD HNL HTG HUF IDR ILS INR IRR JMD KES KGS KHR KPW KYD KZT LAK LBP LKR LRD LSL MAD MDL MGA MKD
MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO NOK NPR NZD PAB PEN PGK PHP PKR PLN QAR RON RSD
RUB SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TOP TRY TTD TWD TZS UAH USD
USN UYU UZS VED VES WST XCD XCG YER ZAR ZMW ZWG`
	zero := `BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF XPF`
	three := `BHD IQD JOD KWD LYD OMR TND`
	four := `CLF UYW`
	none := `XAG XAU XBA XBB XBC XBD XDR XPD XPT XSU XTS XUA XXX`
	for _, set := range []struct {
		codes string
		exp   int
	}{{two, 2}, {zero, 0}, {three, 3}, {four, 4}, {none, NoMinorUnit}} {
		for _, c := range strings.Fields(set.codes) {
			m[c] = set.exp
		}
	}
	return m
}()

// MinorUnits returns the exponent of an ISO 4217 code (upper case) and
// whether the code is an active one.
func MinorUnits(code string) (int, bool) {
	e, ok := iso4217[code]
	return e, ok
}
