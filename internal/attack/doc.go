// Package attack holds no code: its tests try every act that once got past the
// schema's rules, as a service's login, an operator, an auditor and a login
// with nothing would, and check that the database refuses each one and writes
// nothing.
package attack
