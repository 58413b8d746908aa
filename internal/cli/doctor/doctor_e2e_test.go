package doctor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

func TestDoctor(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	fx.Conflict(t, "acme", "doc-1", 1, 2)

	code, order, checks := doctorLines(t, fx.DSN)
	assert.Equal(t, cmdutil.ExitOK, code, "warnings only: %v", checks)
	assert.Equal(t, []string{"dsn", "server", "primary", "replication", "schema", "grants", "partitions", "audit", "anchor", "effects", "quarantine", "failover"}, order)
	assert.Equal(t, "warn", checks["anchor"]["verdict"], "no audit anchor kept yet: %v", checks["anchor"])
	assert.Contains(t, checks["anchor"]["detail"], "no audit anchor kept")
	for _, name := range []string{"dsn", "server", "primary", "schema", "grants", "audit", "effects"} {
		assert.Equal(t, "ok", checks[name]["verdict"], "%s: %v", name, checks[name])
	}
	assert.Contains(t, checks["dsn"]["detail"], string(dbtest.Operator)+"@")
	assert.NotContains(t, checks["dsn"]["detail"], dbtest.TestPassword)
	assert.Contains(t, checks["grants"]["detail"], "acts as operator")
	assert.Equal(t, "warn", checks["quarantine"]["verdict"])
	assert.Contains(t, checks["quarantine"]["detail"], "1 open quarantine record(s)")
	// The test server streams to no synchronous standby, and the demo's
	// transfers are kept for ever.
	assert.Equal(t, "warn", checks["failover"]["verdict"], "%v", checks["failover"])
	assert.Contains(t, checks["failover"]["detail"], "classes kept for ever (demo.transfer")
	assert.Contains(t, checks["failover"]["detail"], "commit without a synchronous standby")
	assert.Contains(t, checks["failover"]["action"], "synchronous_standby_names")

	// Once audit verify kept an anchor for this database: ok, until it is
	// older than --anchor-max-age.
	code, _, errOut := run(t, fx.DSN, "", "audit", "verify")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	_, _, checks = doctorLines(t, fx.DSN)
	assert.Equal(t, "ok", checks["anchor"]["verdict"], "%v", checks["anchor"])
	code, out, _ := run(t, fx.DSN, "", "doctor", "-o", "json", "--skip-sources", "--anchor-max-age", "1ns")
	assert.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, "more than 1ns")

	// With the sources probed: only the manual one, so no purge can be proven.
	code, out, errOut = run(t, fx.DSN, "", "doctor", "-o", "json")
	assert.Equal(t, cmdutil.ExitOK, code, errOut)
	var sources map[string]any
	for _, l := range jsonLines(t, out) {
		if l["check"] == "sources" {
			sources = l
		}
	}
	require.NotNil(t, sources, out)
	assert.Equal(t, "warn", sources["verdict"])
	assert.Contains(t, sources["detail"], "no replay source but the manual one")

	// A read-only session: the primary check fails, and so does doctor.
	code, _, checks = doctorLines(t, readOnly(t, fx.DSN))
	assert.Equal(t, cmdutil.ExitFailure, code)
	assert.Equal(t, "fail", checks["primary"]["verdict"])
	assert.Contains(t, checks["primary"]["action"], "target_session_attrs=read-write")

	// A login that is none of the schema's kinds of user.
	code, _, checks = doctorLines(t, dbtest.As(fx.DSN, dbtest.Nobody))
	assert.Equal(t, cmdutil.ExitFailure, code)
	assert.Equal(t, "fail", checks["grants"]["verdict"], "%v", checks["grants"])
	assert.Contains(t, checks["grants"]["action"], "GRANT idem_operator TO "+string(dbtest.Nobody))

	// The chain's head moved behind the log's back.
	dbtest.Admin(t, fx.DSN, "SET session_replication_role = replica; UPDATE idem.audit_head SET last_id = last_id + 5")
	code, _, checks = doctorLines(t, fx.DSN)
	assert.Equal(t, cmdutil.ExitFailure, code)
	assert.Equal(t, "fail", checks["audit"]["verdict"])
	assert.Contains(t, checks["audit"]["action"], "idemctl audit verify")

	// A table for a person, with the same verdicts.
	code, out, _ = run(t, fx.DSN, "", "doctor", "-o", "table", "--skip-sources")
	assert.Equal(t, cmdutil.ExitFailure, code)
	assert.Contains(t, out, "WHAT TO DO")
	assert.Contains(t, out, "fail")
}

// On a database without the schema, doctor stops at the schema and says
// what to run; unreachable, it stops at the server.
func TestDoctorWrongDatabase(t *testing.T) {
	t.Parallel()
	super := dbtest.NewDatabase(t)
	dbtest.Admin(t, super, "DROP SCHEMA idem CASCADE")
	code, order, checks := doctorLines(t, dbtest.As(super, dbtest.Operator))
	assert.Equal(t, cmdutil.ExitFailure, code)
	assert.Equal(t, "schema", order[len(order)-1])
	assert.Equal(t, "fail", checks["schema"]["verdict"])
	assert.Equal(t, "run idemctl migrate as a superuser", checks["schema"]["action"])

	// A DSN that does not parse is not "ok", and its password is not shown.
	code, order, checks = doctorLines(t, "postgres://app:hunter2@127.0.0.1:notaport/x")
	assert.Equal(t, cmdutil.ExitFailure, code)
	assert.Equal(t, []string{"dsn"}, order)
	assert.Equal(t, "fail", checks["dsn"]["verdict"])
	assert.Contains(t, checks["dsn"]["detail"], "cannot be parsed")
	assert.NotContains(t, fmt.Sprint(checks), "hunter2")

	code, order, checks = doctorLines(t, "postgres://app:hunter2@127.0.0.1:1/x?connect_timeout=2")
	assert.Equal(t, cmdutil.ExitFailure, code)
	assert.Equal(t, []string{"dsn", "server"}, order)
	assert.Equal(t, "fail", checks["server"]["verdict"])
	assert.NotContains(t, fmt.Sprint(checks), "hunter2")
}

func TestStatus(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	fx.Conflict(t, "acme", "st-1", 1, 2)

	code, out, errOut := run(t, fx.DSN, "", "status", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	st := jsonLines(t, out)
	require.Len(t, st, 1)
	assert.EqualValues(t, 1, st[0]["quarantine"].(map[string]any)["open"])
	var transfer map[string]any
	for _, c := range st[0]["classes"].([]any) {
		if c.(map[string]any)["class"] == "demo.transfer" {
			transfer = c.(map[string]any)
		}
	}
	require.NotNil(t, transfer, out)
	assert.EqualValues(t, 1, transfer["operations_last_hour"])
	assert.EqualValues(t, 1, transfer["inbox_bodies"])
	assert.Equal(t, "manual", st[0]["sources"].([]any)[0].(map[string]any)["name"])

	code, out, errOut = run(t, fx.DSN, "", "status", "-o", "prometheus")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	for _, want := range []string{
		"# TYPE idemctl_quarantine_open gauge\nidemctl_quarantine_open 1\n",
		`idemctl_operations{class="demo.transfer",window="1h"} 1` + "\n",
		`idemctl_inbox_bodies{class="demo.transfer"} 1` + "\n",
		`idemctl_source_closed{kind="manual",source="manual"} 0` + "\n",
	} {
		assert.Contains(t, out, want)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		assert.Regexp(t, `^(# (HELP|TYPE) idemctl_\w+ .+|idemctl_\w+(\{[^}]*\})? [0-9.]+)$`, l)
	}

	code, out, errOut = run(t, fx.DSN, "", "status", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "1 open quarantine record(s)")
	assert.Contains(t, out, "demo.transfer")

	code, _, errOut = run(t, fx.DSN, "", "quarantine", "list", "-o", "prometheus")
	assert.Equal(t, cmdutil.ExitUsage, code)
	assert.Contains(t, errOut, "idemctl status only")
}

// On a terminal that takes colour, doctor's warn is yellow (and a fail
// red); NO_COLOR, TERM=dumb or a pipe turn colour off.
func TestDoctorColour(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	fx.Conflict(t, "acme", "doc-1", 1, 2)
	for _, color := range []bool{true, false} {
		ios, _, out, errOut := cmdutil.Test(true)
		ios.SetColor(color)
		f := cmdutil.NewFactory(ios)
		code := cli.Run(context.Background(), f, []string{"doctor", "--skip-sources", "--dsn", fx.DSN})
		f.Close()
		require.Equal(t, cmdutil.ExitOK, code, errOut.String())
		if color {
			assert.Contains(t, out.String(), "\x1b[33mwarn\x1b[0m", out.String())
			assert.NotContains(t, out.String(), "\x1b[31m", "no fail, no red")
		} else {
			assert.NotContains(t, out.String(), "\x1b[")
		}
		assert.Contains(t, out.String(), "review them: idemctl")
	}
}

// doctor --help lists every check doctor runs, in the order it runs them,
// and a table at 80 columns never splits a DSN, a setting name or a path
// (it turns vertical when one does not fit a column).
func TestDoctorHelpListsEveryCheckAndTheTableKeepsTokens(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	_, order, _ := doctorLines(t, fx.DSN)
	code, help, _ := run(t, "", "", "doctor", "--help")
	require.Equal(t, cmdutil.ExitOK, code)
	// The list: the paragraph after "Check, in order", a name a line.
	_, list, ok := strings.Cut(help, "Check, in order")
	require.True(t, ok, help)
	list, _, _ = strings.Cut(strings.SplitN(list, "\n\n", 2)[1], "\n\n")
	var listed []string
	for _, l := range strings.Split(list, "\n") {
		if !strings.HasPrefix(l, "   ") {
			listed = append(listed, strings.Fields(l)[0])
		}
	}
	// --skip-sources leaves the sources check out of doctorLines' run.
	want := append([]string{}, order[:7]...)
	want = append(append(want, "sources"), order[7:]...)
	assert.Equal(t, want, listed, "the help's list of checks")

	ios, _, out, errOut := cmdutil.Test(true)
	ios.SetColor(false)
	ios.SetWidth(80)
	f := cmdutil.NewFactory(ios)
	defer f.Close()
	anchor := "/tmp/idemctl-a-rather-long-directory-name/for-the-anchor/audit-anchors.json"
	code = cli.Run(context.Background(), f, []string{"doctor", "--skip-sources", "--dsn", fx.DSN, "--anchor-file", anchor})
	require.Equal(t, cmdutil.ExitOK, code, errOut.String())
	s := out.String()
	for _, token := range []string{"synchronous_standby_names", string(dbtest.Operator) + "@127.0.0.1:"} {
		assert.Contains(t, s, token, "whole: %s", s)
	}
	assert.Contains(t, s, anchor)
}

// An anchor kept at the database's address under another identity (the
// identity row stamped again, or another database made there) is no
// anchor of this database as it says it is now: doctor warns, naming both
// keys and what to do, rather than say ok.
func TestDoctorWarnsOfAnAnchorKeptUnderAnotherIdentity(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	anchors := t.TempDir() + "/anchors.json"
	code, _, errOut := run(t, fx.DSN, "", "audit", "verify", "--anchor-file", anchors)
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	anchor := func() map[string]any {
		_, out, errOut := run(t, fx.DSN, "", "doctor", "-o", "json", "--skip-sources", "--anchor-file", anchors)
		for _, l := range jsonLines(t, out) {
			if l["check"] == "anchor" {
				return l
			}
		}
		t.Fatalf("no anchor check: %s %s", out, errOut)
		return nil
	}
	assert.Equal(t, "ok", anchor()["verdict"])

	dbtest.Admin(t, fx.DSN, "UPDATE idem.database_identity SET id = replace(gen_random_uuid()::text, '-', '')")
	a := anchor()
	assert.Equal(t, "warn", a["verdict"], "%v", a)
	assert.Contains(t, a["detail"], "now says another identity")
	assert.Contains(t, a["action"], "idemctl audit verify")
}
