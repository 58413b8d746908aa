package console_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

func TestTUICommandBadInput(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		args []string
	}{
		{"refresh too fast", []string{"tui", "--refresh", "100ms"}},
		{"negative refresh", []string{"tui", "--refresh", "-1s"}},
		{"not a duration", []string{"tui", "--refresh", "often"}},
		{"an argument", []string{"tui", "queue"}},
		{"json output", []string{"tui", "-o", "json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			code, _, stderr := runQ(t, "postgres://nobody@127.0.0.1:1/none", c.args...)
			assert.Equal(t, cmdutil.ExitUsage, code, stderr)
			assert.Contains(t, stderr, "idemctl: ")
		})
	}
}

// Without a terminal the console refuses before connecting to anything.
func TestTUINeedsATerminal(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runQ(t, "postgres://nobody@127.0.0.1:1/none", "tui")
	assert.Equal(t, cmdutil.ExitUsage, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "needs a terminal")
	assert.NotContains(t, stderr, "connection refused")
}

// ptyScreen collects what the program draws on a pseudo-terminal.
type ptyScreen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *ptyScreen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// ansiSeq matches the escape sequences the renderer writes (CSI, OSC, and
// two-byte ones), so that the text can be searched.
var ansiSeq = regexp.MustCompile(`\x1b\[[0-9;?<=>]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-B]|\x1b[=>78]`)

// raw is everything written, escape sequences included.
func (s *ptyScreen) raw() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func (s *ptyScreen) text() string { return ansiSeq.ReplaceAllString(s.raw(), "") }

// waitFor waits until the screen shows what match matches, after the offset
// of the text seen so far, and returns the new offset.
func (s *ptyScreen) waitFor(t *testing.T, from int, match func(string) bool, what string) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		txt := s.text()
		if from > len(txt) {
			from = len(txt)
		}
		if match(txt[from:]) {
			return len(txt)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the screen never showed %s; it shows:\n%s", what, s.text())
	return 0
}

func contains(sub string) func(string) bool {
	return func(s string) bool { return bytes.Contains([]byte(s), []byte(sub)) }
}

// The real binary in a pseudo-terminal (100x30, NO_COLOR): the queue shows a
// seeded conflict, survives a resize, opens it on Enter with the differing
// field and both values, and q quits with exit status 0.
func TestTUIInAPseudoTerminal(t *testing.T) {
	t.Parallel()
	bin := idemctlBinary(t)
	_, dsn := dbtest.NewPool(t, 2) // the console runs as an operator
	service := dbtest.PoolAs(t, dsn, dbtest.App, 1)
	ctx := context.Background()
	for _, amount := range []string{"100", "1000"} {
		_, err := idem.Execute(ctx, service, idem.Command{
			Identity: idem.Identity{TenantID: "acme", OperationID: "charge-42"}, Class: "demo.transfer",
			Payload: []byte(`{"from":"acct-1","to":"acct-2","currency":"EUR","amount":` + amount + `}`)})
		require.NoError(t, err)
	}

	runCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(runCtx, bin, "tui", "--dsn", dsn, "--operator", "alice", "--refresh", "0")
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "TERM=xterm-256color")
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 100})
	require.NoError(t, err)
	defer ptmx.Close()
	var screen ptyScreen
	go func() { _, _ = screen.ReadFrom(ptmx) }()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	at := screen.waitFor(t, 0, contains("acme/charge-42"), "the seeded conflict in the queue")
	txt := screen.text()
	assert.Contains(t, txt, "as "+dbtest.PersonOperator+" ("+string(dbtest.Operator)+")", "the header names the person the login maps to, with the login")
	assert.NotRegexp(t, `\x1b\[[0-9;]*3[0-9;]*m`, screen.raw(), "NO_COLOR: no colour sequence")

	// Resized to 120x40, the list is drawn again with wider columns.
	require.NoError(t, pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 120}))
	wide := regexp.MustCompile(`IDENTITY \(tenant/operation\) {40,}CLASS`)
	at = screen.waitFor(t, at, wide.MatchString, "the list redrawn at 120 columns")

	_, err = ptmx.Write([]byte("\r"))
	require.NoError(t, err)
	screen.waitFor(t, at, func(s string) bool {
		return contains("/amount")(s) && contains("stored    100")(s) && contains("incoming  1000")(s)
	}, "the diff of /amount with both values")

	_, err = ptmx.Write([]byte("q"))
	require.NoError(t, err)
	select {
	case err := <-exited:
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			t.Fatalf("exit status %d; screen:\n%s", exitErr.ExitCode(), screen.text())
		}
		require.NoError(t, err)
		assert.Equal(t, 0, cmd.ProcessState.ExitCode())
	case <-time.After(15 * time.Second):
		t.Fatalf("idemctl tui did not exit after q; screen:\n%s", screen.text())
	}
}

// ReadFrom copies the pseudo-terminal's output until it closes.
func (s *ptyScreen) ReadFrom(r interface{ Read([]byte) (int, error) }) (int64, error) {
	var n int64
	buf := make([]byte, 32<<10)
	for {
		k, err := r.Read(buf)
		if k > 0 {
			_, _ = s.Write(buf[:k])
			n += int64(k)
		}
		if err != nil {
			return n, err
		}
	}
}
