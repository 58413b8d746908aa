package reconcile

import (
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// TestTopMemberAgreesWithDecoder: where the fast path answers, it answers
// as the decoder does.
func TestTopMemberAgreesWithDecoder(t *testing.T) {
	docs := []string{
		`{}`, `{"amount":1250,"currency":"EUR","from":"acct-a","to":"acct-b"}`,
		`{"amount":-0.5e+3,"currency":"eur"}`, `{"amount":"12.50","ok":true,"no":false,"z":null}`,
		`{"amount":01}`, `{"amount":1.}`, `{"amount":{"v":1},"currency":"EUR"}`, `{"a":"\u00e9","amount":1}`,
		`{"amount":1,"amount":2}`, `{"amount":1} `, `{"amount":1`, `{"currency":"EUR"}`, `{"amount":"é"}`,
		`{"amount":[1]}`, `[1]`, `{"amount":tru}`, `{"amount":1,}`,
	}
	var pr pointerReader
	for _, doc := range docs {
		for _, name := range []string{"amount", "currency", "z", "missing"} {
			v, found, ok := topMember([]byte(doc), name)
			if !ok {
				continue
			}
			// The decoder's answer, without the fast path.
			pr.rd.Reset([]byte(doc))
			pr.dec.Reset(&pr.rd, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(false))
			err := pr.descend(name)
			var want jsonValue
			if err == nil {
				val, rerr := pr.dec.ReadValue()
				if rerr != nil {
					t.Fatalf("%s %s: fast path answered, decoder: %v", doc, name, rerr)
				}
				want = jsonValue{text: string(val), kind: val.Kind()}
				if val.Kind() == '"' {
					s, _ := jsontext.AppendUnquote(nil, val)
					want.text = string(s)
				}
			}
			if found != (err == nil) || v != want {
				t.Errorf("%s %s: fast %v %v, decoder %v %v", doc, name, v, found, want, err)
			}
		}
	}
}
