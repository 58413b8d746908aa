package cmdutil

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
	Need  DBNeed
	Codes []int
}

// Policies holds every runnable command, by its path without "idemctl ". A
// test fails when a command is missing, so that none escapes the checks.
var Policies = map[string]CommandPolicy{
	"hash":    {Need: NeedNone, Codes: []int{ExitInvalid}},
	"version": {Need: NeedNone},
	"migrate": {Need: NeedServer, Codes: []int{ExitNotPrimary, ExitSchema}},
	"doctor":  {Need: NeedServer},
	"status":  {Need: NeedSchema},
	"lab":     {Need: NeedServer, Codes: []int{ExitInvalid}},
	"inspect": {Need: NeedSchema, Codes: []int{ExitNotPrimary, ExitNotFound}},
	"tui":     {Need: NeedServer},

	"demo init":  {Need: NeedWrite},
	"demo run":   {Need: NeedWrite, Codes: []int{ExitConflict, ExitInvalid}},
	"demo serve": {Need: NeedWrite},

	"resolve":   {Need: NeedWrite, Codes: []int{ExitConflict, ExitInvalid, ExitPending}},
	"reconcile": {Need: NeedSchema, Codes: []int{ExitNotPrimary, ExitConflict, ExitInvalid}},
	"intake":    {Need: NeedSchema, Codes: []int{ExitNotPrimary, ExitConflict, ExitInvalid, ExitNotFound}},
	"suspects":  {Need: NeedSchema, Codes: []int{ExitConflict}},

	"quarantine list":          {Need: NeedSchema, Codes: []int{ExitNotFound}},
	"quarantine show":          {Need: NeedSchema, Codes: []int{ExitNotFound}},
	"quarantine export":        {Need: NeedSchema, Codes: []int{ExitInvalid, ExitNotFound}},
	"quarantine reject":        {Need: NeedWrite, Codes: []int{ExitInvalid, ExitNotFound}},
	"quarantine accept-as-new": {Need: NeedWrite, Codes: []int{ExitInvalid, ExitNotFound}},
	"quarantine groups":        {Need: NeedSchema},
	"quarantine bulk show":     {Need: NeedSchema, Codes: []int{ExitNotFound}},
	"quarantine bulk approve":  {Need: NeedWrite, Codes: []int{ExitInvalid, ExitNotFound}},
	"quarantine bulk run":      {Need: NeedWrite, Codes: []int{ExitInvalid, ExitNotFound}},
	"quarantine bulk abort":    {Need: NeedWrite, Codes: []int{ExitInvalid, ExitNotFound}},

	"audit list":   {Need: NeedSchema},
	"audit verify": {Need: NeedSchema, Codes: []int{ExitInvalid}},

	"horizon source add":    {Need: NeedWrite, Codes: []int{ExitInvalid}},
	"horizon source list":   {Need: NeedSchema},
	"horizon source remove": {Need: NeedWrite, Codes: []int{ExitInvalid, ExitNotFound}},
	"horizon check":         {Need: NeedSchema, Codes: []int{ExitInvalid}},
	"horizon plan":          {Need: NeedWrite, Codes: []int{ExitInvalid}},
	"horizon approve":       {Need: NeedWrite, Codes: []int{ExitInvalid, ExitNotFound}},
	"horizon cancel":        {Need: NeedWrite, Codes: []int{ExitInvalid, ExitNotFound}},
	"horizon purge":         {Need: NeedWrite, Codes: []int{ExitInvalid, ExitNotFound}},
	"horizon status":        {Need: NeedSchema, Codes: []int{ExitNotFound}},
	"horizon maintain":      {Need: NeedWrite},

	"class list": {Need: NeedSchema},
	"class set":  {Need: NeedWrite, Codes: []int{ExitInvalid}},

	"corrections add":  {Need: NeedWrite, Codes: []int{ExitInvalid}},
	"corrections list": {Need: NeedSchema},
	"corrections done": {Need: NeedWrite, Codes: []int{ExitInvalid, ExitNotFound}},

	"person add":    {Need: NeedWrite, Codes: []int{ExitInvalid}},
	"person remove": {Need: NeedWrite, Codes: []int{ExitInvalid}},
	"person list":   {Need: NeedSchema},

	"redrive allow":    {Need: NeedWrite, Codes: []int{ExitInvalid}},
	"redrive disallow": {Need: NeedWrite, Codes: []int{ExitInvalid}},
	"redrive list":     {Need: NeedSchema},

	"change list":    {Need: NeedSchema},
	"change show":    {Need: NeedSchema, Codes: []int{ExitNotFound}},
	"change approve": {Need: NeedWrite, Codes: []int{ExitInvalid, ExitNotFound}},
	"change abort":   {Need: NeedWrite, Codes: []int{ExitInvalid, ExitNotFound}},

	"record plan":    {Need: NeedWrite, Codes: []int{ExitInvalid}},
	"record list":    {Need: NeedSchema},
	"record show":    {Need: NeedSchema, Codes: []int{ExitNotFound}},
	"record approve": {Need: NeedWrite, Codes: []int{ExitInvalid, ExitNotFound}},
	"record run":     {Need: NeedWrite, Codes: []int{ExitConflict, ExitInvalid, ExitNotFound}},
	"record abort":   {Need: NeedWrite, Codes: []int{ExitInvalid, ExitNotFound}},
	"import plan":    {Need: NeedWrite, Codes: []int{ExitInvalid}},
	"import approve": {Need: NeedWrite, Codes: []int{ExitInvalid, ExitNotFound}},
	"import run":     {Need: NeedWrite, Codes: []int{ExitConflict, ExitInvalid, ExitNotFound}},
	"import abort":   {Need: NeedWrite, Codes: []int{ExitInvalid, ExitNotFound}},
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

// probeDB reads where q's database stands: primary or not, and the schema.
func probeDB(ctx context.Context, q recovery.RowQuerier, reached string) (DBState, error) {
	s, err := health.Probe(ctx, q)
	if err != nil {
		return DBState{}, fmt.Errorf("%s: %w", reached, err)
	}
	return DBState{Session: s, Reached: reached}, nil
}

// check turns st into the error a command with need gets, or nil.
func (st DBState) Check(need DBNeed) error {
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
