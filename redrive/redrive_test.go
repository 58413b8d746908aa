package redrive

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemctl/idemctl/idem"
)

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want error
	}{
		{"https", Config{Kind: KindHTTP, URL: "https://pay.example/charges"}, nil},
		{"http to loopback", Config{Kind: KindHTTP, URL: "http://127.0.0.1:8089/x"}, nil},
		{"http elsewhere", Config{Kind: KindHTTP, URL: "http://pay.example/x"}, ErrInvalidConfig},
		{"http elsewhere, insecure", Config{Kind: KindHTTP, URL: "http://pay.example/x", Insecure: true}, nil},
		{"no host", Config{Kind: KindHTTP, URL: "https:///x"}, ErrInvalidConfig},
		{"user in URL", Config{Kind: KindHTTP, URL: "https://u:p@pay.example/x"}, ErrSecret},
		{"GET", Config{Kind: KindHTTP, URL: "https://pay.example/x", Method: "GET"}, ErrInvalidConfig},
		{"nats", Config{Kind: KindNATS, URL: "nats://127.0.0.1:4222", Subject: "pay.charge"}, nil},
		{"nats wildcard", Config{Kind: KindNATS, URL: "nats://127.0.0.1:4222", Subject: "pay.*"}, ErrInvalidConfig},
		{"nats over http", Config{Kind: KindNATS, URL: "http://127.0.0.1:4222", Subject: "pay"}, ErrInvalidConfig},
		{"kind", Config{Kind: "kafka", URL: "https://pay.example/x"}, ErrInvalidConfig},
		{"timeout", Config{Kind: KindHTTP, URL: "https://pay.example/x", TimeoutSeconds: 301}, ErrInvalidConfig},
		{"concurrency", Config{Kind: KindHTTP, URL: "https://pay.example/x", Concurrency: 257}, ErrInvalidConfig},
		{"tenant header", Config{Kind: KindHTTP, URL: "https://pay.example/x", TenantHeader: "X Tenant"}, ErrInvalidConfig},
		{"header with newline", Config{Kind: KindHTTP, URL: "https://pay.example/x", Headers: map[string]string{"X-A": "a\r\nb"}}, ErrInvalidConfig},
		{"credential value", Config{Kind: KindHTTP, URL: "https://pay.example/x", Headers: map[string]string{"Authorization": "Bearer s3cret"}}, ErrSecret},
		{"api key value", Config{Kind: KindHTTP, URL: "https://pay.example/x", Headers: map[string]string{"X-Api-Key": "k"}}, ErrSecret},
		{"credential reference", Config{Kind: KindHTTP, URL: "https://pay.example/x", Headers: map[string]string{"Authorization": "env:IDEMCTL_REDRIVE_PAY_TOKEN", "X-Api-Key": "file:payments/k"}}, nil},
		{"empty reference", Config{Kind: KindHTTP, URL: "https://pay.example/x", Headers: map[string]string{"Authorization": "env:"}}, ErrSecret},
	}
	for _, c := range cases {
		err := c.cfg.Validate()
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: Validate() = %v, want %v", c.name, err, c.want)
		}
	}
}

func TestIdempotencyKey(t *testing.T) {
	for _, id := range []string{"op-1", `with "quotes"`, `back\slash`, ""} {
		k := IdempotencyKey(id)
		if k[0] != '"' || k[len(k)-1] != '"' {
			t.Errorf("IdempotencyKey(%q) = %s: not a structured-field string", id, k)
		}
		if got := ParseIdempotencyKey(k); got != id {
			t.Errorf("ParseIdempotencyKey(IdempotencyKey(%q)) = %q", id, got)
		}
	}
	if got := ParseIdempotencyKey("bare-token"); got != "bare-token" {
		t.Errorf("a bare key reads as %q", got)
	}
}

func TestMsgID(t *testing.T) {
	a := MsgID(idem.Identity{TenantID: "t1", OperationID: "op"})
	if a != MsgID(idem.Identity{TenantID: "t1", OperationID: "op"}) {
		t.Fatal("MsgID is not stable")
	}
	// The separator keeps ("t1", "op") apart from ("t", "1op").
	if a == MsgID(idem.Identity{TenantID: "t", OperationID: "1op"}) || a == MsgID(idem.Identity{TenantID: "t2", OperationID: "op"}) {
		t.Fatal("two identities share a MsgID")
	}
}

// TestHTTPSend: the request carries the canonical payload and the identity's
// headers, references are read at send time, and the reply is reported as is.
func TestHTTPSend(t *testing.T) {
	var got *http.Request
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got, body = r, string(b)
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("busy"))
	}))
	defer srv.Close()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "key"), []byte("file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("IDEMCTL_REDRIVE_TEST_TOKEN", "Bearer env-secret")
	s, err := NewSender(Config{Kind: KindHTTP, URL: srv.URL + "/charges", Method: "PUT", TenantHeader: "X-Tenant",
		Headers: map[string]string{"Authorization": "env:IDEMCTL_REDRIVE_TEST_TOKEN", "X-Api-Key": "file:key"}}, Credentials{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	reply, err := s.Send(context.Background(), Request{Identity: idem.Identity{TenantID: "t1", OperationID: `op"1`},
		Class: "pay", Canonical: []byte(`{"a":1}`), Hash: "jcs-sha256:00"})
	if err != nil {
		t.Fatal(err)
	}
	if reply.Status != 503 || reply.RetryAfter != 3*time.Second || reply.Body != "busy" {
		t.Errorf("reply = %+v", reply)
	}
	h := got.Header
	for name, want := range map[string]string{
		"Idempotency-Key": `"op\"1"`, "X-Tenant": "t1", "Authorization": "Bearer env-secret",
		"X-Api-Key": "file-secret", "Idem-Payload-Hash": "jcs-sha256:00", "Content-Type": "application/json",
	} {
		if h.Get(name) != want {
			t.Errorf("header %s = %q, want %q", name, h.Get(name), want)
		}
	}
	if got.Method != "PUT" || body != `{"a":1}` {
		t.Errorf("sent %s %q", got.Method, body)
	}

	// A reference that cannot be read: no sender, so nothing is sent.
	s2, err := NewSender(Config{Kind: KindHTTP, URL: srv.URL, Headers: map[string]string{"Authorization": "env:IDEMCTL_REDRIVE_TEST_UNSET"}}, Credentials{})
	if err == nil || !strings.Contains(err.Error(), "IDEMCTL_REDRIVE_TEST_UNSET is not set") || s2 != nil {
		t.Errorf("unset reference: err %v", err)
	}
}
