package redrive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/idemhttp"
)

// Request is one operation to send again: its identity, class and canonical
// payload (the exact text its hash was computed over).
type Request struct {
	idem.Identity
	Class     string
	Canonical []byte
	Hash      string
}

// Reply is what the target said. It is evidence for the report, never the
// answer: the caller reads the identity on the primary.
type Reply struct {
	// Status is the HTTP status (0 for NATS).
	Status int `json:"status,omitempty"`
	// RetryAfter is the target's Retry-After, when it gave one.
	RetryAfter time.Duration `json:"-"`
	// Stored is true when JetStream stored the message (NATS).
	Stored bool `json:"stored,omitempty"`
	// Duplicate is true when JetStream recognised the message id.
	Duplicate bool `json:"duplicate,omitempty"`
	// Body is the start of the reply's body, for the report.
	Body string `json:"body,omitempty"`
	// Database is the database the service says it recorded into
	// (idem.DatabaseHeader), when it says so.
	Database string `json:"database,omitempty"`
}

// String says the reply in a few words.
func (r Reply) String() string {
	switch {
	case r.Status > 0:
		return strconv.Itoa(r.Status)
	case r.Duplicate:
		return "published (duplicate id: already in the stream)"
	case r.Stored:
		return "published"
	}
	return "no reply"
}

// Sender sends re-drives to one class's target.
type Sender interface {
	// Send delivers one request. An error means no reply was read (a
	// timeout, a lost connection): the operation may or may not have run.
	Send(ctx context.Context, r Request) (Reply, error)
	Close()
}

// ErrRedirected: the target answered with a redirect, which a re-drive never
// follows (the Location may be anywhere, and the request carries the
// payload and the credentials).
var ErrRedirected = errors.New("the target redirected the re-drive, which is never followed")

// ErrNotSent: the connection to the target could not be made (refused, no
// route, a name that does not resolve): not a byte of the request left, so
// the target cannot have applied it.
var ErrNotSent = errors.New("no connection, nothing sent")

// notConnected reports whether err happened while dialling, before the
// request was written: connection refused, unreachable, DNS.
func notConnected(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// NewSender returns the sender for c, holding at most c.Concurrency requests
// in flight. Its header references are read now, with creds: a refused one
// means no sender, and nothing sent. The caller checks the target against
// the allow-list first (CheckTarget).
func NewSender(c Config, creds Credentials) (Sender, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	headers, err := c.resolveHeaders(creds)
	if err != nil {
		return nil, err
	}
	slots := make(chan struct{}, c.concurrency())
	if c.Kind == KindNATS {
		return newNATSSender(c, headers, slots)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = c.concurrency()
	// Never through a proxy from the environment (HTTP_PROXY, HTTPS_PROXY):
	// the request carries the payload and the credentials, and the
	// allow-list names the target it may reach, not a proxy in between.
	transport.Proxy = nil
	client := &http.Client{Timeout: c.Timeout(), Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &httpSender{cfg: c, headers: headers, slots: slots, client: client}, nil
}

type httpSender struct {
	cfg     Config
	headers map[string]string
	slots   chan struct{}
	client  *http.Client
}

// Send posts the canonical payload with the identity's headers.
func (s *httpSender) Send(ctx context.Context, r Request) (Reply, error) {
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	case <-ctx.Done():
		return Reply{}, ctx.Err()
	}
	method := s.cfg.Method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, s.cfg.URL, bytes.NewReader(r.Canonical))
	if err != nil {
		return Reply{}, fmt.Errorf("re-drive request: %w", err)
	}
	s.setHeaders(req.Header, r)
	resp, err := s.client.Do(req)
	if err != nil {
		if notConnected(err) {
			return Reply{}, fmt.Errorf("re-drive to %s: %w: %w", s.cfg.URL, ErrNotSent, err)
		}
		return Reply{}, fmt.Errorf("re-drive to %s: %w", s.cfg.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return Reply{}, fmt.Errorf("%w: HTTP %d to Location %q", ErrRedirected, resp.StatusCode, resp.Header.Get("Location"))
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return Reply{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After")), Body: string(body),
		Database: resp.Header.Get(idem.DatabaseHeader)}, nil
}

// setHeaders sets the configured headers (references read when the sender
// was made) and the identity's.
func (s *httpSender) setHeaders(h http.Header, r Request) {
	for name, val := range s.headers {
		h.Set(name, val)
	}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "idemctl-resolve")
	h.Set("Idempotency-Key", IdempotencyKey(r.OperationID))
	h.Set(s.cfg.tenantHeader(), r.TenantID)
	h.Set("Idem-Payload-Hash", r.Hash)
}

// Close releases idle connections.
func (s *httpSender) Close() { s.client.CloseIdleConnections() }

// IdempotencyKey is the Idempotency-Key value for an operation id: a
// structured-field string, as the draft defines it.
func IdempotencyKey(operationID string) string { return idemhttp.FormatKey(operationID) }

// ParseIdempotencyKey reads an Idempotency-Key value (a quoted string, or a
// bare token from clients that do not quote it).
func ParseIdempotencyKey(v string) string {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return strings.NewReplacer(`\\`, `\`, `\"`, `"`).Replace(v[1 : len(v)-1])
	}
	return v
}

// retryAfter reads Retry-After in seconds (an HTTP date is taken as 1s).
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	return time.Second
}

// MsgID is the Nats-Msg-Id of an operation: derived from its identity, so a
// re-publish of the same operation is recognised by JetStream's de-duplication.
func MsgID(id idem.Identity) string {
	sum := sha256.Sum256([]byte(id.TenantID + "\x00" + id.OperationID))
	return "idem-" + hex.EncodeToString(sum[:16])
}

type natsSender struct {
	cfg     Config
	headers map[string]string
	slots   chan struct{}
	nc      *nats.Conn
	js      jetstream.JetStream
}

// newNATSSender connects to the configured servers and to no other: the
// servers a cluster advertises (INFO connect_urls) are not on the
// allow-list, so they are ignored.
func newNATSSender(c Config, headers map[string]string, slots chan struct{}) (Sender, error) {
	servers, err := c.Servers()
	if err != nil {
		return nil, err
	}
	urls := make([]string, len(servers))
	for i, u := range servers {
		urls[i] = u.String()
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.Timeout(c.Timeout()), nats.Name("idemctl resolve"),
		nats.IgnoreDiscoveredServers())
	if err != nil {
		return nil, fmt.Errorf("connect to NATS %s: %w", c.URL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("JetStream: %w", err)
	}
	return &natsSender{cfg: c, headers: headers, slots: slots, nc: nc, js: js}, nil
}

// Send publishes the canonical payload to the subject; the stream's
// acknowledgement is the reply.
func (s *natsSender) Send(ctx context.Context, r Request) (Reply, error) {
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	case <-ctx.Done():
		return Reply{}, ctx.Err()
	}
	msg := nats.NewMsg(s.cfg.Subject)
	msg.Data = r.Canonical
	for name, val := range s.headers {
		msg.Header.Set(name, val)
	}
	// The identity's headers last: none of them is ever the configuration's.
	msg.Header.Set(nats.MsgIdHdr, MsgID(r.Identity))
	msg.Header.Set(s.cfg.tenantHeader(), r.TenantID)
	msg.Header.Set(OperationHeader, r.OperationID)
	msg.Header.Set("Idem-Class", r.Class)
	msg.Header.Set("Idem-Payload-Hash", r.Hash)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout())
	defer cancel()
	ack, err := s.js.PublishMsg(ctx, msg)
	if errors.Is(err, jetstream.ErrNoStreamResponse) {
		return Reply{}, fmt.Errorf("publish to %s: %w (no JetStream stream answered for the subject: create the service's stream first)", s.cfg.Subject, ErrNotStored)
	}
	if err != nil {
		return Reply{}, fmt.Errorf("publish to %s: %w", s.cfg.Subject, err)
	}
	return Reply{Stored: true, Duplicate: ack.Duplicate}, nil
}

// Close drains the connection.
func (s *natsSender) Close() { s.nc.Close() }
