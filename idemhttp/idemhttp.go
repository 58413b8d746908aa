// Package idemhttp is net/http middleware that makes a Go service idempotent
// under the Idempotency-Key header (draft-ietf-httpapi-idempotency-key-header)
// through idemctl's executor (idem.ExecuteFuncPrepared): the identity, the
// handler's database writes and the saved response commit in one
// transaction, so a retry, a re-drive by `idemctl resolve` or a duplicate
// webhook is answered from the inbox and never runs the handler twice.
//
// For each request of a configured method (POST and PATCH by default):
//
//   - the key is the Idempotency-Key header, a structured-field string; a
//     missing, malformed or too long key is 400 (application/problem+json);
//   - the tenant comes from Config.Tenant (a header by default); the business
//     identity is (tenant, key);
//   - the payload is the request body, canonicalised and hashed as the
//     executor does: a body that is not JSON is 400, one that canonicalisation
//     would change (a lossy number, a duplicate member) or that is nested
//     too deeply is 422, one over the limit 413;
//   - new identity: the handler runs inside the transaction (Tx gives it);
//     its response is saved with the identity when Config.Save says so (any
//     status below 500 by default) and the transaction commits; otherwise
//     everything rolls back and the response goes out as it is;
//   - same key and payload again: the saved status, the saved headers that
//     are safe to replay (Config.ReplayHeaders) and the body, with
//     Idempotent-Replayed: true; the handler does not run. A JSON body is
//     saved as JSON (jsonb: queryable, shown by inspect) and replayed
//     compact, equal as JSON but not byte for byte (member order and spacing
//     may differ); any other body is saved and replayed byte for byte;
//   - same key, another payload: 422, the conflict quarantined with its
//     evidence by the executor; the handler does not run;
//   - the first request with the key still in flight: 409 with Retry-After
//     (after waiting Config.InFlightWait for it); two concurrent requests
//     with one key run the handler once;
//   - every response names the database the service records into
//     (idem.DatabaseHeader), so that resolve can tell a service of another
//     environment.
//
// A downstream call (a payment provider) cannot join the transaction. Pass it
// DownstreamKey: derived from the identity, it is the same on every retry, so
// when the process dies between the provider's answer and the commit, the
// retry (which runs the handler again, since nothing was recorded) reaches the
// same charge at the provider instead of a second one.
package idemhttp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemctl/idemctl/idem"
)

// KeyHeader is the request header that carries the operation id.
const KeyHeader = "Idempotency-Key"

// ReplayedHeader is set on a response served from the inbox.
const ReplayedHeader = "Idempotent-Replayed"

// DefaultTenantHeader is the header the default tenant extractor reads.
const DefaultTenantHeader = "Idem-Tenant"

// DB is what the middleware needs of a database handle: transactions for the
// executor and one query for the database identity (a *pgxpool.Pool).
type DB interface {
	idem.TxBeginner
	idem.DBTX
}

// TenantFunc returns the tenant of a request (a header, the authenticated
// principal); an error or an empty tenant is a 400 whose detail is the error.
type TenantFunc func(*http.Request) (string, error)

// TenantHeader reads the tenant from a request header.
func TenantHeader(name string) TenantFunc {
	return func(r *http.Request) (string, error) {
		v := r.Header.Get(name)
		if v == "" {
			return "", fmt.Errorf("the %s header is required: it names the tenant", name)
		}
		return v, nil
	}
}

// Config configures the middleware. DB and Class are required.
type Config struct {
	// DB is a login granted idem_app (and whatever the handlers write).
	DB DB
	// Class is the registered operation class (with no SQL effect: the
	// handler is the effect).
	Class string
	// Methods are the methods that require a key; others pass through
	// untouched. Default POST and PATCH.
	Methods []string
	// Tenant extracts the tenant. Default TenantHeader(DefaultTenantHeader).
	Tenant TenantFunc
	// MaxBodyBytes bounds the request body. Default idem.DefaultMaxPayloadBytes.
	MaxBodyBytes int64
	// ReplayHeaders are the response headers saved and replayed. Default
	// Content-Type, Content-Language and Location. Never list a header that
	// carries a secret or a per-response value (Set-Cookie, Date).
	ReplayHeaders []string
	// InFlightWait is how long a request waits for a first attempt with the
	// same key still in flight before answering 409. Default 100ms.
	InFlightWait time.Duration
	// RetryAfter is the Retry-After of that 409. Default 1s.
	RetryAfter time.Duration
	// KeyNamespace separates the downstream keys of services that share
	// identities. Default "idemhttp".
	KeyNamespace string
	// Save says whether a handler's status is saved with the identity.
	// Default: every status below 500 (a 5xx rolls back, and a retry runs
	// the handler again).
	Save func(status int) bool
	// AfterCommit, when set, runs after an applied request committed and
	// before its response is written.
	AfterCommit func(r *http.Request, res idem.Result)
	// Logf, when set, gets a line for each failure the client sees as 5xx.
	Logf func(format string, args ...any)
}

// Middleware wraps handlers; make it with New.
type Middleware struct {
	cfg  Config
	mu   sync.Mutex
	dbID string
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Middleware, error) {
	if cfg.DB == nil {
		return nil, errors.New("idemhttp: Config.DB is required")
	}
	if cfg.Class == "" {
		return nil, errors.New("idemhttp: Config.Class is required")
	}
	if len(cfg.Methods) == 0 {
		cfg.Methods = []string{http.MethodPost, http.MethodPatch}
	}
	if cfg.Tenant == nil {
		cfg.Tenant = TenantHeader(DefaultTenantHeader)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = idem.DefaultMaxPayloadBytes
	}
	if cfg.ReplayHeaders == nil {
		cfg.ReplayHeaders = []string{"Content-Type", "Content-Language", "Location"}
	}
	if cfg.InFlightWait <= 0 {
		cfg.InFlightWait = 100 * time.Millisecond
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = time.Second
	}
	if cfg.KeyNamespace == "" {
		cfg.KeyNamespace = "idemhttp"
	}
	if cfg.Save == nil {
		cfg.Save = func(status int) bool { return status < 500 }
	}
	return &Middleware{cfg: cfg}, nil
}

// Wrap returns next behind the middleware.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := m.databaseID(r.Context()); id != "" {
			w.Header().Set(idem.DatabaseHeader, id)
		}
		if !slices.Contains(m.cfg.Methods, r.Method) {
			next.ServeHTTP(w, r)
			return
		}
		m.serve(w, r, next)
	})
}

// databaseID reads the database identity once (a failure is read again on
// the next request).
func (m *Middleware) databaseID(ctx context.Context) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dbID == "" {
		id, err := idem.DatabaseID(ctx, m.cfg.DB)
		if err != nil {
			m.logf("idemhttp: %v", err)
			return ""
		}
		m.dbID = id
	}
	return m.dbID
}

func (m *Middleware) logf(format string, args ...any) {
	if m.cfg.Logf != nil {
		m.cfg.Logf(format, args...)
	}
}

// envelope is the saved response: the handler's status, its replayable
// headers and its body (JSON as it is, anything else in base64).
type envelope struct {
	Status     int                 `json:"status"`
	Headers    map[string][]string `json:"headers,omitempty"`
	Body       json.RawMessage     `json:"body,omitempty"`
	BodyBase64 string              `json:"body_base64,omitempty"`
}

// errNotSaved carries a handler response that is not saved (a 5xx by
// default): the transaction rolls back and the response goes out as it is.
type errNotSaved struct{ rec *recorder }

func (e *errNotSaved) Error() string {
	return "the handler answered " + strconv.Itoa(e.rec.status) + ": not saved"
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	key, err := ParseKey(r.Header.Get(KeyHeader))
	if err != nil {
		problem(w, http.StatusBadRequest, "invalid Idempotency-Key", err.Error())
		return
	}
	tenant, err := m.cfg.Tenant(r)
	if err == nil && tenant == "" {
		err = errors.New("the request names no tenant")
	}
	if err != nil {
		problem(w, http.StatusBadRequest, "no tenant", err.Error())
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, m.cfg.MaxBodyBytes+1))
	if err != nil {
		problem(w, http.StatusBadRequest, "unreadable body", err.Error())
		return
	}
	if int64(len(body)) > m.cfg.MaxBodyBytes {
		problem(w, http.StatusRequestEntityTooLarge, "body too large",
			fmt.Sprintf("the body is over %d bytes", m.cfg.MaxBodyBytes))
		return
	}
	id := idem.Identity{TenantID: tenant, OperationID: key}
	p, err := idem.Prepare(idem.Command{Identity: id, Class: m.cfg.Class, Payload: body}, idem.PayloadLimits{})
	if err != nil {
		status, title := payloadProblem(err)
		problem(w, status, title, err.Error())
		return
	}

	var rec *recorder
	res, err := idem.ExecuteFuncPrepared(r.Context(), lockWaiter{m.cfg.DB, m.cfg.InFlightWait}, p,
		func(ctx context.Context, tx pgx.Tx) (resp json.RawMessage, err error) {
			// The wait for an in-flight first attempt is over: the
			// handler's own statements wait as they would anywhere.
			if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout TO DEFAULT"); err != nil {
				return nil, err
			}
			rec = newRecorder()
			req := r.Clone(context.WithValue(ctx, ctxKey{}, &call{tx: tx, id: id, ns: m.cfg.KeyNamespace}))
			req.Body = io.NopCloser(bytes.NewReader(body))
			req.ContentLength = int64(len(body))
			if err := runHandler(next, rec, req); err != nil {
				return nil, err
			}
			if !m.cfg.Save(rec.status) {
				return nil, &errNotSaved{rec}
			}
			return m.envelope(rec)
		})
	var notSaved *errNotSaved
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &notSaved):
		notSaved.rec.writeTo(w)
	case errors.As(err, &pgErr) && pgErr.Code == "55P03":
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(m.cfg.RetryAfter.Round(time.Second)/time.Second))))
		problem(w, http.StatusConflict, "request in flight",
			"a request with this Idempotency-Key is still being processed; retry after it completes")
	case errors.Is(err, idem.ErrOutcomeUnknown):
		m.logf("idemhttp: %s: %v", id, err)
		problem(w, http.StatusInternalServerError, "outcome unknown",
			"the commit was not acknowledged; send the same request again with the same Idempotency-Key to learn its outcome")
	case err != nil:
		m.logf("idemhttp: %s: %v", id, err)
		problem(w, http.StatusInternalServerError, "not processed", "the request failed and nothing was recorded; it is safe to retry with the same Idempotency-Key")
	case res.Outcome == idem.Applied:
		if m.cfg.AfterCommit != nil {
			m.cfg.AfterCommit(r, res)
		}
		rec.writeTo(w)
	case res.Outcome == idem.AlreadyApplied:
		m.replay(w, res.Response)
	case res.Outcome == idem.Conflict:
		problemWith(w, http.StatusUnprocessableEntity, "Idempotency-Key reused with another payload",
			"this key was first used with another request body; the request was not processed and is quarantined for review",
			map[string]any{"quarantine_id": res.QuarantineID})
	case res.Outcome == idem.Purged:
		problem(w, http.StatusGone, "already processed",
			"a request with this key and body was processed; its saved response is no longer kept")
	default:
		problem(w, http.StatusInternalServerError, "unexpected outcome", string(res.Outcome))
	}
}

// runHandler runs the handler, turning a panic into an error (the
// transaction then rolls back).
func runHandler(h http.Handler, w http.ResponseWriter, r *http.Request) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			err = fmt.Errorf("the handler panicked: %v", p)
		}
	}()
	h.ServeHTTP(w, r)
	return nil
}

func (m *Middleware) envelope(rec *recorder) (json.RawMessage, error) {
	e := envelope{Status: rec.status, Headers: map[string][]string{}}
	for _, name := range m.cfg.ReplayHeaders {
		if v := rec.header.Values(name); len(v) > 0 {
			e.Headers[http.CanonicalHeaderKey(name)] = v
		}
	}
	b := rec.body.Bytes()
	switch {
	case len(b) == 0:
	case json.Valid(b):
		e.Body = b
	default:
		e.BodyBase64 = base64.StdEncoding.EncodeToString(b)
	}
	return json.Marshal(e)
}

// replay writes a saved response. A response saved by another writer of the
// class (idem.execute, a service without this middleware) is its body, sent
// as JSON with 200.
func (m *Middleware) replay(w http.ResponseWriter, saved json.RawMessage) {
	var e envelope
	if err := json.Unmarshal(saved, &e); err != nil || e.Status < 100 || e.Status > 999 {
		e = envelope{Status: http.StatusOK, Headers: map[string][]string{"Content-Type": {"application/json"}}, Body: saved}
	}
	for name, vs := range e.Headers {
		if slices.ContainsFunc(m.cfg.ReplayHeaders, func(h string) bool { return strings.EqualFold(h, name) }) {
			w.Header()[http.CanonicalHeaderKey(name)] = vs
		}
	}
	w.Header().Set(ReplayedHeader, "true")
	var buf bytes.Buffer
	if json.Compact(&buf, e.Body) != nil {
		buf.Write(e.Body)
	}
	body := buf.Bytes()
	if e.BodyBase64 != "" {
		body, _ = base64.StdEncoding.DecodeString(e.BodyBase64)
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}

// payloadProblem maps a payload error of idem.Prepare to a status.
func payloadProblem(err error) (int, string) {
	switch {
	case errors.Is(err, idem.ErrPayloadTooLarge):
		return http.StatusRequestEntityTooLarge, "body too large"
	case errors.Is(err, idem.ErrInvalidIdentity):
		return http.StatusBadRequest, "invalid identity"
	case errors.Is(err, idem.ErrInvalidJSON):
		return http.StatusBadRequest, "body is not JSON"
	}
	// Valid JSON that the executor cannot keep exactly: a lossy number, a
	// duplicate member, a lone surrogate, U+0000, too deep.
	return http.StatusUnprocessableEntity, "body cannot be canonicalised"
}

// problem writes an application/problem+json answer (RFC 9457).
func problem(w http.ResponseWriter, status int, title, detail string) {
	problemWith(w, status, title, detail, nil)
}

func problemWith(w http.ResponseWriter, status int, title, detail string, extra map[string]any) {
	body := map[string]any{"type": "about:blank", "title": title, "status": status, "detail": detail}
	for k, v := range extra {
		body[k] = v
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// ParseKey reads an Idempotency-Key value: a structured-field string (RFC
// 8941: printable ASCII in double quotes, with \" and \\ escapes) of at most
// idem.MaxOperationIDBytes once unescaped.
func ParseKey(v string) (string, error) {
	if v == "" {
		return "", errors.New("the Idempotency-Key header is required for this method")
	}
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", errors.New(`the Idempotency-Key header must be a structured-field string, e.g. "8e03978e-40d5-43e8-bc93-6894a57f9324" (with the quotes)`)
	}
	var b strings.Builder
	for i := 1; i < len(v)-1; i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i >= len(v)-1 || (v[i] != '"' && v[i] != '\\') {
				return "", errors.New(`the Idempotency-Key header holds a backslash that escapes neither " nor \`)
			}
			b.WriteByte(v[i])
		case c == '"':
			return "", errors.New(`the Idempotency-Key header holds an unescaped " inside the string`)
		case c < 0x20 || c > 0x7e:
			return "", errors.New("the Idempotency-Key header holds a character that is not printable ASCII")
		default:
			b.WriteByte(c)
		}
	}
	key := b.String()
	if key == "" {
		return "", errors.New("the Idempotency-Key header is an empty string")
	}
	if len(key) > idem.MaxOperationIDBytes {
		return "", fmt.Errorf("the Idempotency-Key header is %d bytes long; at most %d", len(key), idem.MaxOperationIDBytes)
	}
	return key, nil
}

// FormatKey is the Idempotency-Key value of a key (a structured-field string).
func FormatKey(key string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
}

// lockWaiter begins transactions whose lock waits end after wait: the
// executor's claim then answers 55P03 instead of queueing behind a first
// attempt still in flight.
type lockWaiter struct {
	db   idem.TxBeginner
	wait time.Duration
}

func (l lockWaiter) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := l.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, "SELECT set_config('lock_timeout', $1, true)", strconv.FormatInt(l.wait.Milliseconds(), 10)); err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	return tx, nil
}

type ctxKey struct{}

type call struct {
	tx pgx.Tx
	id idem.Identity
	ns string
}

func from(ctx context.Context) *call {
	c, _ := ctx.Value(ctxKey{}).(*call)
	return c
}

// Tx is the transaction the handler writes in: its writes commit with the
// identity and the saved response, or not at all. Nil outside the middleware.
func Tx(ctx context.Context) pgx.Tx {
	if c := from(ctx); c != nil {
		return c.tx
	}
	return nil
}

// Identity is the request's business identity (tenant, key).
func Identity(ctx context.Context) (idem.Identity, bool) {
	if c := from(ctx); c != nil {
		return c.id, true
	}
	return idem.Identity{}, false
}

// DownstreamKey is the idempotency key to pass to a downstream system (a
// payment provider) for this request: 64 hex digits derived from the
// identity and Config.KeyNamespace, the same on every retry.
func DownstreamKey(ctx context.Context) string {
	c := from(ctx)
	if c == nil {
		return ""
	}
	return DeriveKey(c.ns, c.id)
}

// DeriveKey is DownstreamKey for an identity outside a request.
func DeriveKey(namespace string, id idem.Identity) string {
	sum := sha256.Sum256([]byte(namespace + "\x00" + id.TenantID + "\x00" + id.OperationID))
	return hex.EncodeToString(sum[:])
}

// recorder buffers a handler's response until the transaction is decided.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	wrote  bool
}

func newRecorder() *recorder { return &recorder{header: http.Header{}, status: http.StatusOK} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.body.Write(b)
}

func (r *recorder) writeTo(w http.ResponseWriter) {
	for k, vs := range r.header {
		w.Header()[k] = vs
	}
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body.Bytes())
}
