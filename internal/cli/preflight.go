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

// DBNeed is what a command needs of the database it reaches. It is checked
// once, right after the first connection, before the command reads or
// writes anything (Factory.preflight): the wrong database, a schema this
// binary cannot use and a standby are one line each, never a raw SQLSTATE.
type DBNeed int

const (
	// NeedNone: the command never connects (hash, version).
	NeedNone DBNeed = iota
	// NeedServer: the command reaches a server and checks the rest itself
	// (migrate installs the schema, doctor reports on it, lab uses its own).
	NeedServer
	// NeedSchema: schema idem at this binary's version.
	NeedSchema
	// NeedWrite: NeedSchema on a primary, in a read-write session.
	NeedWrite
)

// CommandPolicy is one command's need and the exit codes it adds to those
// its need implies (exitCodesOf).
type CommandPolicy struct {
	need  DBNeed
	codes []int
}

// Policies holds every runnable command, by its path without "idemctl ". A
// test fails when a command is missing, so that none escapes the checks.
var Policies = map[string]CommandPolicy{
	"hash":    {need: NeedNone, codes: []int{ExitInvalid}},
	"version": {need: NeedNone},
	"migrate": {need: NeedServer, codes: []int{ExitNotPrimary, ExitSchema}},
	"doctor":  {need: NeedServer},
	"status":  {need: NeedSchema},
	"lab":     {need: NeedServer, codes: []int{ExitInvalid}},
	"inspect": {need: NeedSchema, codes: []int{ExitNotPrimary, ExitNotFound}},
	"tui":     {need: NeedServer},

	"demo init":  {need: NeedWrite},
	"demo run":   {need: NeedWrite, codes: []int{ExitConflict, ExitInvalid}},
	"demo serve": {need: NeedWrite},

	"resolve":   {need: NeedWrite, codes: []int{ExitConflict, ExitInvalid, ExitPending}},
	"reconcile": {need: NeedSchema, codes: []int{ExitNotPrimary, ExitConflict, ExitInvalid}},
	"intake":    {need: NeedSchema, codes: []int{ExitNotPrimary, ExitConflict, ExitInvalid, ExitNotFound}},
	"suspects":  {need: NeedSchema, codes: []int{ExitConflict}},

	"quarantine list":          {need: NeedSchema},
	"quarantine show":          {need: NeedSchema, codes: []int{ExitNotFound}},
	"quarantine export":        {need: NeedSchema, codes: []int{ExitInvalid, ExitNotFound}},
	"quarantine reject":        {need: NeedWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"quarantine accept-as-new": {need: NeedWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"quarantine groups":        {need: NeedSchema},
	"quarantine bulk show":     {need: NeedSchema, codes: []int{ExitNotFound}},
	"quarantine bulk approve":  {need: NeedWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"quarantine bulk run":      {need: NeedWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"quarantine bulk abort":    {need: NeedWrite, codes: []int{ExitInvalid, ExitNotFound}},

	"audit list":   {need: NeedSchema},
	"audit verify": {need: NeedSchema, codes: []int{ExitInvalid}},

	"horizon source add":    {need: NeedWrite, codes: []int{ExitInvalid}},
	"horizon source list":   {need: NeedSchema},
	"horizon source remove": {need: NeedWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"horizon check":         {need: NeedSchema, codes: []int{ExitInvalid}},
	"horizon plan":          {need: NeedWrite, codes: []int{ExitInvalid}},
	"horizon approve":       {need: NeedWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"horizon cancel":        {need: NeedWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"horizon purge":         {need: NeedWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"horizon status":        {need: NeedSchema, codes: []int{ExitNotFound}},
	"horizon maintain":      {need: NeedWrite},

	"class list": {need: NeedSchema},
	"class set":  {need: NeedWrite, codes: []int{ExitInvalid}},

	"corrections add":  {need: NeedWrite, codes: []int{ExitInvalid}},
	"corrections list": {need: NeedSchema},
	"corrections done": {need: NeedWrite, codes: []int{ExitInvalid, ExitNotFound}},

	"person add":    {need: NeedWrite, codes: []int{ExitInvalid}},
	"person remove": {need: NeedWrite, codes: []int{ExitInvalid}},
	"person list":   {need: NeedSchema},

	"redrive allow":    {need: NeedWrite, codes: []int{ExitInvalid}},
	"redrive disallow": {need: NeedWrite, codes: []int{ExitInvalid}},
	"redrive list":     {need: NeedSchema},

	"change list":    {need: NeedSchema},
	"change show":    {need: NeedSchema, codes: []int{ExitNotFound}},
	"change approve": {need: NeedWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"change abort":   {need: NeedWrite, codes: []int{ExitInvalid, ExitNotFound}},

	"record plan":    {need: NeedWrite, codes: []int{ExitInvalid}},
	"record list":    {need: NeedSchema},
	"record show":    {need: NeedSchema, codes: []int{ExitNotFound}},
	"record approve": {need: NeedWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"record run":     {need: NeedWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"import plan":    {need: NeedWrite, codes: []int{ExitInvalid}},
	"import approve": {need: NeedWrite, codes: []int{ExitInvalid, ExitNotFound}},
	"import run":     {need: NeedWrite, codes: []int{ExitInvalid, ExitNotFound}},
}

// CommandKey is cmd's path without the root's name: "quarantine reject".
func CommandKey(cmd *cobra.Command) string {
	path := cmd.CommandPath()
	if i := strings.IndexByte(path, ' '); i >= 0 {
		return path[i+1:]
	}
	return ""
}

// PolicyOf returns cmd's policy; hidden helpers (lab worker) have none.
func PolicyOf(cmd *cobra.Command) (CommandPolicy, bool) {
	p, ok := Policies[CommandKey(cmd)]
	return p, ok
}

// DBState is where the database stands, as the preflight found it.
type DBState struct {
	health.Session
	// Reached describes the server and database, never a password.
	Reached string
}

// ProbeDB reads where q's database stands: primary or not, and the schema.
func ProbeDB(ctx context.Context, q recovery.RowQuerier, reached string) (DBState, error) {
	s, err := health.Probe(ctx, q)
	if err != nil {
		return DBState{}, fmt.Errorf("%s: %w", reached, err)
	}
	return DBState{Session: s, Reached: reached}, nil
}

// check turns st into the error a command with need gets, or nil.
func (st DBState) check(need DBNeed) error {
	if need < NeedSchema {
		return nil
	}
	if p := st.SchemaProblem(); p != "" {
		return WithCode(ExitSchema, fmt.Errorf("%s: %w", st.Reached, errors.New(p)))
	}
	if need == NeedWrite && (st.InRecovery || st.ReadOnly) {
		return WithCode(ExitNotPrimary, fmt.Errorf("%s: %w", st.Reached,
			&recovery.NotPrimaryError{InRecovery: st.InRecovery, ReadOnly: st.ReadOnly}))
	}
	return nil
}

// headerLine is the one line a command on a terminal prints on stderr when
// it reaches the database: which one, and what it is.
func (st DBState) headerLine() string {
	s := "db " + st.Reached + ", " + st.Role()
	if st.Schema == health.SchemaPresent {
		s += fmt.Sprintf(", schema %03d", st.SchemaVersion)
	}
	return s
}
