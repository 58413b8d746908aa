package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/migrations"
	recovery "github.com/idemctl/idemctl/recover"
)

// dbNeed is what a command needs of the database it reaches. It is checked
// once, right after the first connection, before the command reads or
// writes anything (Factory.preflight): the wrong database, a schema this
// binary cannot use and a standby are one line each, never a raw SQLSTATE.
type dbNeed int

const (
	// needNone: the command never connects (hash, version).
	needNone dbNeed = iota
	// needServer: the command reaches a server and checks the rest itself
	// (migrate installs the schema, doctor reports on it, lab uses its own).
	needServer
	// needSchema: schema idem at this binary's version.
	needSchema
	// needWrite: needSchema on a primary, in a read-write session.
	needWrite
)

// commandPolicy is one command's need and the exit codes it adds to those
// its need implies (exitCodesOf).
type commandPolicy struct {
	need  dbNeed
	codes []int
}

// policies holds every runnable command, by its path without "idemctl ". A
// test fails when a command is missing, so that none escapes the checks.
var policies = map[string]commandPolicy{
	"hash":    {need: needNone, codes: []int{ExitInvalid}},
	"version": {need: needNone},
	"migrate": {need: needServer, codes: []int{ExitNotPrimary, ExitSchema}},
	"doctor":  {need: needServer},
	"status":  {need: needSchema},
	"lab":     {need: needServer, codes: []int{ExitInvalid}},
	"inspect": {need: needSchema, codes: []int{ExitNotPrimary, ExitNotFound}},
	"tui":     {need: needServer},

	"demo init":  {need: needWrite},
	"demo run":   {need: needWrite, codes: []int{ExitConflict, ExitInvalid}},
	"demo serve": {need: needWrite},

	"resolve":   {need: needWrite, codes: []int{ExitConflict, ExitInvalid, ExitPending}},
	"reconcile": {need: needSchema, codes: []int{ExitNotPrimary, ExitConflict, ExitInvalid, ExitNotFound}},
	"intake":    {need: needSchema, codes: []int{ExitNotPrimary, ExitConflict, ExitInvalid, ExitNotFound}},

	"quarantine list":          {need: needSchema},
	"quarantine show":          {need: needSchema, codes: []int{ExitNotFound}},
	"quarantine export":        {need: needSchema, codes: []int{ExitInvalid, ExitNotFound}},
	"quarantine reject":        {need: needWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"quarantine accept-as-new": {need: needWrite, codes: []int{ExitInvalid, ExitNotFound}},

	"audit list":   {need: needSchema},
	"audit verify": {need: needSchema, codes: []int{ExitInvalid}},

	"horizon source add":    {need: needWrite, codes: []int{ExitInvalid}},
	"horizon source list":   {need: needSchema},
	"horizon source remove": {need: needWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"horizon check":         {need: needSchema, codes: []int{ExitInvalid}},
	"horizon plan":          {need: needWrite, codes: []int{ExitInvalid}},
	"horizon approve":       {need: needWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"horizon cancel":        {need: needWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"horizon purge":         {need: needWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"horizon status":        {need: needSchema, codes: []int{ExitNotFound}},
	"horizon maintain":      {need: needWrite},

	"class list": {need: needSchema},
	"class set":  {need: needWrite, codes: []int{ExitInvalid}},

	"corrections add":  {need: needWrite, codes: []int{ExitInvalid}},
	"corrections list": {need: needSchema},
	"corrections done": {need: needWrite, codes: []int{ExitInvalid, ExitNotFound}},

	"person add":    {need: needWrite, codes: []int{ExitInvalid}},
	"person remove": {need: needWrite, codes: []int{ExitInvalid}},
	"person list":   {need: needSchema},

	"redrive allow":    {need: needWrite, codes: []int{ExitInvalid}},
	"redrive disallow": {need: needWrite, codes: []int{ExitInvalid}},
	"redrive list":     {need: needSchema},
}

// commandKey is cmd's path without the root's name: "quarantine reject".
func commandKey(cmd *cobra.Command) string {
	path := cmd.CommandPath()
	if i := strings.IndexByte(path, ' '); i >= 0 {
		return path[i+1:]
	}
	return ""
}

// policyOf returns cmd's policy; hidden helpers (lab worker) have none.
func policyOf(cmd *cobra.Command) (commandPolicy, bool) {
	p, ok := policies[commandKey(cmd)]
	return p, ok
}

// Where the database stands, as the preflight found it.
type dbState struct {
	// Reached describes the server and database, never a password.
	Reached    string
	InRecovery bool
	ReadOnly   bool
	// Schema: "missing", "unreadable" (the login may not read the history:
	// a service login), or "ok"; the versions when readable.
	Schema        string
	SchemaVersion int
	CodeVersion   int
}

const preflightSQL = `
SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on',
       to_regclass('idem.schema_migrations') IS NOT NULL,
       coalesce(has_table_privilege(to_regclass('idem.schema_migrations'), 'SELECT'), false)
       AND coalesce(has_table_privilege(to_regclass('idem.code_package'), 'SELECT'), false)`

const versionsSQL = `
SELECT coalesce((SELECT max(version) FROM idem.schema_migrations), 0),
       coalesce((SELECT version FROM idem.code_package), 0)`

// probeDB reads where q's database stands: primary or not, and the schema.
func probeDB(ctx context.Context, q recovery.RowQuerier, reached string) (dbState, error) {
	st := dbState{Reached: reached, Schema: "missing"}
	var exists, readable bool
	if err := q.QueryRow(ctx, preflightSQL).Scan(&st.InRecovery, &st.ReadOnly, &exists, &readable); err != nil {
		return st, fmt.Errorf("%s: check the database: %w", reached, err)
	}
	switch {
	case !exists:
		return st, nil
	case !readable:
		st.Schema = "unreadable"
		return st, nil
	}
	st.Schema = "ok"
	if err := q.QueryRow(ctx, versionsSQL).Scan(&st.SchemaVersion, &st.CodeVersion); err != nil {
		return st, fmt.Errorf("%s: read the schema version: %w", reached, err)
	}
	return st, nil
}

// schemaProblem says, in one line, what is wrong with the schema and what to
// run; "" when this binary can use it.
func (st dbState) schemaProblem() string {
	want, code := migrations.SchemaVersion(), migrations.CodeVersion
	switch {
	case st.Schema == "missing":
		return "schema idem is missing: this is not an idemctl database (check --dsn and IDEMCTL_DSN), or it was never migrated (run idemctl migrate as a superuser)"
	case st.Schema == "unreadable":
		return ""
	case st.SchemaVersion > want || st.CodeVersion > code:
		return fmt.Sprintf("schema idem is newer than this idemctl (database: schema %03d, code package %d; this binary: %03d, %d): use an idemctl of that version or newer (idemctl version)",
			st.SchemaVersion, st.CodeVersion, want, code)
	case st.SchemaVersion < want || st.CodeVersion < code:
		return fmt.Sprintf("schema idem is older than this idemctl (database: schema %03d, code package %d; this binary: %03d, %d): run idemctl migrate as a superuser",
			st.SchemaVersion, st.CodeVersion, want, code)
	}
	return ""
}

// check turns st into the error a command with need gets, or nil.
func (st dbState) check(need dbNeed) error {
	if need < needSchema {
		return nil
	}
	if p := st.schemaProblem(); p != "" {
		return withCode(ExitSchema, fmt.Errorf("%s: %w", st.Reached, errors.New(p)))
	}
	if need == needWrite && (st.InRecovery || st.ReadOnly) {
		return withCode(ExitNotPrimary, fmt.Errorf("%s: %w", st.Reached,
			&recovery.NotPrimaryError{InRecovery: st.InRecovery, ReadOnly: st.ReadOnly}))
	}
	return nil
}

// role names the server's side of the session for the header line.
func (st dbState) role() string {
	switch {
	case st.InRecovery:
		return "standby"
	case st.ReadOnly:
		return "read-only session"
	}
	return "primary"
}

// headerLine is the one line a command on a terminal prints on stderr when
// it reaches the database: which one, and what it is.
func (st dbState) headerLine() string {
	s := "db " + st.Reached + ", " + st.role()
	if st.Schema == "ok" {
		s += fmt.Sprintf(", schema %03d", st.SchemaVersion)
	}
	return s
}
