package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/internal/health"
	"github.com/idemctl/idemctl/recovery"
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
	"reconcile": {need: needSchema, codes: []int{ExitNotPrimary, ExitConflict, ExitInvalid}},
	"intake":    {need: needSchema, codes: []int{ExitNotPrimary, ExitConflict, ExitInvalid, ExitNotFound}},
	"suspects":  {need: needSchema, codes: []int{ExitConflict}},

	"quarantine list":          {need: needSchema},
	"quarantine show":          {need: needSchema, codes: []int{ExitNotFound}},
	"quarantine export":        {need: needSchema, codes: []int{ExitInvalid, ExitNotFound}},
	"quarantine reject":        {need: needWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"quarantine accept-as-new": {need: needWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"quarantine groups":        {need: needSchema},
	"quarantine bulk show":     {need: needSchema, codes: []int{ExitNotFound}},
	"quarantine bulk approve":  {need: needWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"quarantine bulk run":      {need: needWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"quarantine bulk abort":    {need: needWrite, codes: []int{ExitInvalid, ExitNotFound}},

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

	"change list":    {need: needSchema},
	"change show":    {need: needSchema, codes: []int{ExitNotFound}},
	"change approve": {need: needWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"change abort":   {need: needWrite, codes: []int{ExitInvalid, ExitNotFound}},

	"record plan":    {need: needWrite, codes: []int{ExitInvalid}},
	"record list":    {need: needSchema},
	"record show":    {need: needSchema, codes: []int{ExitNotFound}},
	"record approve": {need: needWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"record run":     {need: needWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"import plan":    {need: needWrite, codes: []int{ExitInvalid}},
	"import approve": {need: needWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"import run":     {need: needWrite, codes: []int{ExitInvalid, ExitNotFound}},
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

// dbState is where the database stands, as the preflight found it.
type dbState struct {
	health.Session
	// Reached describes the server and database, never a password.
	Reached string
}

// probeDB reads where q's database stands: primary or not, and the schema.
func probeDB(ctx context.Context, q recovery.RowQuerier, reached string) (dbState, error) {
	s, err := health.Probe(ctx, q)
	if err != nil {
		return dbState{}, fmt.Errorf("%s: %w", reached, err)
	}
	return dbState{Session: s, Reached: reached}, nil
}

// check turns st into the error a command with need gets, or nil.
func (st dbState) check(need dbNeed) error {
	if need < needSchema {
		return nil
	}
	if p := st.SchemaProblem(); p != "" {
		return withCode(ExitSchema, fmt.Errorf("%s: %w", st.Reached, errors.New(p)))
	}
	if need == needWrite && (st.InRecovery || st.ReadOnly) {
		return withCode(ExitNotPrimary, fmt.Errorf("%s: %w", st.Reached,
			&recovery.NotPrimaryError{InRecovery: st.InRecovery, ReadOnly: st.ReadOnly}))
	}
	return nil
}

// headerLine is the one line a command on a terminal prints on stderr when
// it reaches the database: which one, and what it is.
func (st dbState) headerLine() string {
	s := "db " + st.Reached + ", " + st.Role()
	if st.Schema == health.SchemaPresent {
		s += fmt.Sprintf(", schema %03d", st.SchemaVersion)
	}
	return s
}
