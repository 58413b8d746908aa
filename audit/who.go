package audit

// Who is how every screen names who planned, approved, decided or ran
// something: the person, then the login in parentheses, `alice (op1)`. The
// database compares persons (four eyes), so a login alone would hide whether
// two logins are one person. A login that maps to no person says so:
// `(no person) op1`. Neither known: "-".
func Who(person, login string) string {
	switch {
	case person == "" && login == "":
		return "-"
	case person == "":
		return "(no person) " + login
	case login == "":
		return person
	}
	return person + " (" + login + ")"
}

// Who is the record's person and login (see the function Who).
func (r Record) Who() string { return Who(r.Person, r.DBUser) }
