package redrive

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemctl/idemctl/idem"
)

// listenOn serves h on a loopback address of its own (127.0.0.2 is not on
// any allow-list) and counts the requests it receives.
func listenOn(t *testing.T, ip string, h http.HandlerFunc) (addr string, hits *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		// Every Linux machine binds the whole of 127.0.0.0/8: an IPv4
		// loopback that cannot be bound is a broken machine, a failure. A
		// kernel without IPv6 has no ::1 to bind: the IPv6 case says so.
		if net.ParseIP(ip).To4() != nil {
			t.Fatalf("cannot listen on the loopback address %s: %v", ip, err)
		}
		t.Skipf("SKIPPED LOUDLY: no IPv6 loopback %s on this machine (IPv6 disabled?): %v", ip, err)
	}
	hits = &atomic.Int64{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), hits
}

// A target that answers 307 to another host: the redirect is not followed,
// the error names its Location, and the other host hears nothing (neither
// the payload nor the credential header).
func TestRedirectIsNeverFollowed(t *testing.T) {
	elsewhere, stolen := listenOn(t, "127.0.0.2", func(w http.ResponseWriter, r *http.Request) {})
	location := "http://" + elsewhere + "/steal"
	for _, status := range []int{301, 302, 303, 307, 308} {
		target, hits := listenOn(t, "127.0.0.1", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, location, status)
		})
		t.Setenv("IDEMCTL_REDRIVE_TEST_TOKEN", "Bearer Hunter2Secret")
		s, err := NewSender(Config{Kind: KindHTTP, URL: "http://" + target + "/charges",
			Headers: map[string]string{"Authorization": "env:IDEMCTL_REDRIVE_TEST_TOKEN"}}, Credentials{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Send(context.Background(), Request{Identity: idem.Identity{TenantID: "t", OperationID: "o"}, Canonical: []byte(`{}`)})
		s.Close()
		if !errors.Is(err, ErrRedirected) || !strings.Contains(err.Error(), location) {
			t.Errorf("%d: err = %v, want ErrRedirected naming %s", status, err, location)
		}
		if hits.Load() != 1 {
			t.Errorf("%d: the target heard %d requests", status, hits.Load())
		}
	}
	if stolen.Load() != 0 {
		t.Errorf("the redirect's Location received %d requests", stolen.Load())
	}
}

// Every server of a NATS list is a host to check; the sender reads them the
// way nats.Connect does.
func TestServersOfANATSList(t *testing.T) {
	c := Config{Kind: KindNATS, URL: "nats://127.0.0.1:14222, 127.0.0.2:14223,tls://[::1]:4222", Subject: "pay"}
	hosts, err := c.Hosts()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(hosts, " ") != "127.0.0.1 127.0.0.2 ::1" {
		t.Errorf("hosts = %v", hosts)
	}
	for _, url := range []string{
		"nats://127.0.0.1:4222,S3cr3tTOKEN@127.0.0.2:4222",
		"nats://127.0.0.1:4222,nats://u:p@127.0.0.2:4222",
	} {
		if err := (Config{Kind: KindNATS, URL: url, Subject: "pay"}).Validate(); !errors.Is(err, ErrSecret) {
			t.Errorf("%s: Validate() = %v, want ErrSecret", url, err)
		}
	}
	for _, url := range []string{"nats://127.0.0.1:4222,http://127.0.0.2:80", "nats://127.0.0.1:4222,ws://127.0.0.2:80", " , "} {
		if err := (Config{Kind: KindNATS, URL: url, Subject: "pay"}).Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidConfig", url, err)
		}
	}
}

// A reference names only what the person running resolve set aside: a
// variable with the prefix, a file under their credential directory, only
// its owner may read, reached without ".." or a link out of it. Anything
// else is refused with one line that names the reference and says why.
func TestCredentialReferences(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	write := func(path, content string, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "payments", "token"), "Bearer in-dir\n", 0o600)
	write(filepath.Join(dir, "shared"), "group-readable", 0o640)
	write(filepath.Join(dir, "public"), "world-readable", 0o604)
	write(filepath.Join(outside, "id_ed25519"), "PRIVATE KEY", 0o600)
	if err := os.Symlink(filepath.Join(outside, "id_ed25519"), filepath.Join(dir, "link-out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("payments/token", filepath.Join(dir, "link-in")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "dir-out")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PGPASSWORD", "Hunter2Secret")
	t.Setenv("IDEMCTL_REDRIVE_TOKEN", "Bearer in-env")
	creds := Credentials{Dir: dir}

	for ref, want := range map[string]string{
		"env:IDEMCTL_REDRIVE_TOKEN": "Bearer in-env",
		"file:payments/token":       "Bearer in-dir",
		"file:link-in":              "Bearer in-dir",
		"plain value":               "plain value",
	} {
		got, err := creds.Resolve(ref)
		if err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
	for ref, why := range map[string]string{
		"env:PGPASSWORD":            "IDEMCTL_REDRIVE_",
		"env:HOME":                  "IDEMCTL_REDRIVE_",
		"env:idemctl_redrive_token": "IDEMCTL_REDRIVE_",
		"env:IDEMCTL_REDRIVE_UNSET": "not set",
		"env:":                      "IDEMCTL_REDRIVE_",
		"file:" + filepath.Join(outside, "id_ed25519"):      "relative",
		"file:../" + filepath.Base(outside) + "/id_ed25519": "..",
		"file:payments/../shared":                           "..",
		"file:.ssh/id_ed25519":                              "hidden",
		"file:link-out":                                     "escapes",
		"file:dir-out/id_ed25519":                           "escapes",
		"file:shared":                                       "chmod 600",
		"file:public":                                       "chmod 600",
		"file:payments":                                     "not a regular file",
		"file:missing":                                      "no such file",
		"file:":                                             "relative",
	} {
		got, err := creds.Resolve(ref)
		if !errors.Is(err, ErrReference) || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), ref) ||
			strings.Contains(err.Error(), "\n") || got != "" {
			t.Errorf("Resolve(%q) = %q, %v; want one line naming it, saying %q", ref, got, err, why)
		}
		if err != nil && (strings.Contains(err.Error(), "Hunter2") || strings.Contains(err.Error(), "PRIVATE")) {
			t.Errorf("Resolve(%q) error shows a secret: %v", ref, err)
		}
	}
	if _, err := (Credentials{}).Resolve("file:payments/token"); err == nil || !strings.Contains(err.Error(), CredentialDirEnv) {
		t.Errorf("without a credential directory: %v", err)
	}

	// A class that references what was not set aside has no sender: nothing
	// is sent.
	target, hits := listenOn(t, "127.0.0.1", func(w http.ResponseWriter, r *http.Request) {})
	_, err := NewSender(Config{Kind: KindHTTP, URL: "http://" + target + "/x",
		Headers: map[string]string{"X-Trace": "plain", "Authorization": "env:PGPASSWORD"}}, creds)
	if err == nil || hits.Load() != 0 {
		t.Errorf("NewSender with env:PGPASSWORD: err %v, %d requests", err, hits.Load())
	}
}

// A proxy named by the environment (HTTP_PROXY and the like) never sees a
// re-drive: the sender's transport has no proxy at all. (Go reads those
// variables once per process and never proxies a loopback target, so the
// transport itself is what can be checked.)
func TestRedriveIgnoresTheEnvironmentsProxy(t *testing.T) {
	s, err := NewSender(Config{Kind: KindHTTP, URL: "https://charges.example/charges"}, Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	transport, ok := s.(*httpSender).client.Transport.(*http.Transport)
	if !ok || transport.Proxy != nil {
		t.Fatalf("the re-drive's transport takes a proxy from the environment (%T)", s.(*httpSender).client.Transport)
	}
}

// A configured header may not replace one the re-drive sets from the
// operation: the stream's message id (its deduplication), the identity, the
// payload's hash.
func TestConfiguredHeadersCannotReplaceTheIdentitys(t *testing.T) {
	for _, name := range []string{"Nats-Msg-Id", "nats-msg-id", "Idempotency-Key", "Idem-Payload-Hash", "Idem-Class", OperationHeader, DefaultTenantHeader, "X-Org", "Content-Type"} {
		for _, kind := range []string{KindHTTP, KindNATS} {
			c := Config{Kind: kind, URL: "http://127.0.0.1:1/x", TenantHeader: "X-Org", Headers: map[string]string{name: "forged"}}
			if kind == KindNATS {
				c.URL, c.Subject = "nats://127.0.0.1:4222", "charges.redrive"
			}
			err := c.Validate()
			if name == DefaultTenantHeader {
				// Not the tenant header of this configuration: allowed.
				if err != nil {
					t.Errorf("%s %s: %v", kind, name, err)
				}
				continue
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "cannot be configured") {
				t.Errorf("%s header %s: err = %v, want it refused", kind, name, err)
			}
		}
	}
}
