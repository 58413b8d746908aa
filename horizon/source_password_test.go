package horizon

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/idemctl/idemctl/internal/db"
)

// passwordTrap is a PostgreSQL server on a loopback address of its own that
// asks every client for its password in clear and keeps what it is given;
// refuse: it refuses every client at once (password authentication failed)
// without asking for anything.
func passwordTrap(t *testing.T, refuse bool) (addr string, got chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("the attack needs a second loopback address, 127.0.0.2 (every Linux routes 127.0.0.0/8 to lo): %v", err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	got = make(chan string, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				be := pgproto3.NewBackend(c, c)
				msg, err := be.ReceiveStartupMessage()
				if err != nil {
					return
				}
				if _, ok := msg.(*pgproto3.SSLRequest); ok {
					_, _ = c.Write([]byte("N"))
					if _, err := be.ReceiveStartupMessage(); err != nil {
						return
					}
				}
				if refuse {
					be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "28P01", Message: "password authentication failed for user \"reader\""})
					_ = be.Flush()
					return
				}
				be.Send(&pgproto3.AuthenticationCleartextPassword{})
				if be.Flush() != nil {
					return
				}
				be.SetAuthType(pgproto3.AuthTypeCleartextPassword)
				m, err := be.Receive()
				if p, ok := m.(*pgproto3.PasswordMessage); ok && err == nil {
					got <- p.Password
				}
				be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "28P01", Message: "no"})
				_ = be.Flush()
			}()
		}
	}()
	return ln.Addr().String(), got
}

// A source is configured by an operator and probed by whoever runs horizon
// check: its host never receives that person's PGPASSWORD, nor a variable
// the operator named that was not set aside for sources, nor even the one
// set aside when it asks for it in clear text (it goes only by SCRAM).
func TestSourceProbeSendsNoPasswordOfTheRunner(t *testing.T) {
	addr, got := passwordTrap(t, false)
	host, port, _ := net.SplitHostPort(addr)
	refusing, _ := passwordTrap(t, true)
	rhost, rport, _ := net.SplitHostPort(refusing)
	t.Setenv("PGPASSWORD", "Hunter2RunnersOwn")
	t.Setenv("PGPASSFILE", "/nonexistent")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "Hunter2Cloud")
	t.Setenv("IDEMCTL_SOURCE_DLQ_PASSWORD", "set-aside")
	dsn := "host=" + host + " port=" + port + " user=reader dbname=dlq sslmode=disable connect_timeout=3"
	probe := func(passwordEnv string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := probePostgres(ctx, Source{Name: "dlq", Kind: KindPostgres,
			Config: SourceConfig{DSN: dsn, Query: "SELECT now()", PasswordEnv: passwordEnv}}, nil)
		select {
		case p := <-got:
			return p, err
		case <-time.After(200 * time.Millisecond):
			return "", err
		}
	}
	if p, err := probe(""); strings.Contains(p, "Hunter2") || err == nil {
		t.Errorf("without password_env the source heard %q (err %v)", p, err)
	}
	if p, err := probe("AWS_SECRET_ACCESS_KEY"); p != "" || err == nil || !strings.Contains(err.Error(), "IDEMCTL_SOURCE_") {
		t.Errorf("password_env AWS_SECRET_ACCESS_KEY: the source heard %q (err %v)", p, err)
	}
	p, err := probe("IDEMCTL_SOURCE_DLQ_PASSWORD")
	if p != "" {
		t.Errorf("password_env set aside for sources, asked for in clear text: the source heard %q", p)
	}
	if err == nil || !errors.Is(err, db.ErrConnect) || strings.Contains(err.Error(), "set-aside") ||
		!strings.Contains(err.Error(), "replay source dlq") || !strings.Contains(err.Error(), "not sent") {
		t.Errorf("a source asking for its password in clear text: %v", err)
	}
	// A refused password says where it came from (not PGPASSWORD or
	// ~/.pgpass, which a source never uses), names the source, never shows
	// the password, and is still a failure to connect.
	dsn = "host=" + rhost + " port=" + rport + " user=reader dbname=dlq sslmode=disable connect_timeout=3"
	_, err = probe("IDEMCTL_SOURCE_DLQ_PASSWORD")
	if err == nil || !errors.Is(err, db.ErrConnect) || strings.Contains(err.Error(), "set-aside") ||
		!strings.Contains(err.Error(), "replay source dlq") ||
		!strings.Contains(err.Error(), "the password comes from IDEMCTL_SOURCE_DLQ_PASSWORD") {
		t.Errorf("a refused password for a source: %v", err)
	}
	dsn = "host=" + host + " port=" + port + " user=reader dbname=dlq sslmode=disable connect_timeout=3"
	if _, err := probe(""); err == nil || !strings.Contains(err.Error(), "password_env") || strings.Contains(err.Error(), "PGPASSWORD or ~/.pgpass") {
		t.Errorf("a refused source without password_env: %v", err)
	}
	if err := (Source{Name: "dlq", Kind: KindPostgres, Config: SourceConfig{DSN: dsn, Query: "SELECT 1", PasswordEnv: "PGPASSWORD"}}).Validate(); err == nil {
		t.Error("a source naming PGPASSWORD is accepted")
	}
}
