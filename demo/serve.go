package demo

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/idemhttp"
	"github.com/idemctl/idemctl/redrive"
)

// Faults the reference service can be told to inject, each on the first
// request of an identity only (a re-drive of it then goes through), so that
// the re-drive path can be shown and tested against real failures.
type Faults struct {
	// AckWithoutRecord answers 200 without running or recording anything:
	// the "effect before marker" service.
	AckWithoutRecord bool
	// FailBeforeCommit charges the provider, then fails before its commit
	// (HTTP 500): nothing is recorded, the provider has charged.
	FailBeforeCommit bool
	// CrashAfterProvider charges the provider, then the process dies
	// (SIGKILL) before its commit.
	CrashAfterProvider bool
	// CrashAfterCommit commits, then the process dies before replying.
	CrashAfterCommit bool
	// Slow waits this long before handling the request (a first attempt
	// still in flight when something else sends the same operation).
	Slow time.Duration
	// Every, when above 1, applies the faults to one identity in Every
	// only (chosen by a hash of the identity), the others are served well.
	Every int
}

// ParseFaults reads --fault values: ack-without-record, fail-before-commit,
// crash-after-provider, crash-after-commit, slow=DURATION, every=N.
func ParseFaults(specs []string) (Faults, error) {
	var f Faults
	for _, s := range specs {
		name, arg, _ := strings.Cut(s, "=")
		switch name {
		case "ack-without-record":
			f.AckWithoutRecord = true
		case "fail-before-commit":
			f.FailBeforeCommit = true
		case "crash-after-provider":
			f.CrashAfterProvider = true
		case "crash-after-commit":
			f.CrashAfterCommit = true
		case "every":
			n, err := strconv.Atoi(arg)
			if err != nil || n < 1 {
				return Faults{}, fmt.Errorf("--fault every=N: %q is not a positive number", arg)
			}
			f.Every = n
		case "slow":
			d, err := time.ParseDuration(arg)
			if err != nil || d <= 0 {
				return Faults{}, fmt.Errorf("--fault slow=DURATION: %q is not a positive duration", arg)
			}
			f.Slow = d
		default:
			return Faults{}, fmt.Errorf("--fault %q: use ack-without-record, fail-before-commit, crash-after-provider, crash-after-commit, slow=DURATION or every=N", s)
		}
	}
	return f, nil
}

// Service is the reference service: the demo ledger's transfer as
// application code, under AppClass, through idem.ExecuteFunc. Its effect
// first charges a fake payment provider (demo.provider_charge, outside the
// service's transaction, as a remote provider is) with a key derived from the
// identity, which the provider de-duplicates on, then posts the transfer in
// the same transaction as the inbox row. It is the example a Go team copies.
type Service struct {
	// Pool is a login granted idem_app (and the demo tables).
	Pool *pgxpool.Pool
	// Provider is the fake provider's own connections (a remote system: its
	// calls never wait for the service's transactions' connections). Nil
	// means Pool, which then needs twice the concurrency in connections.
	Provider *pgxpool.Pool
	Faults   Faults
	// Logf, when set, tells what the service does, a line a request.
	Logf func(format string, args ...any)

	mu   sync.Mutex
	seen map[idem.Identity]bool
}

// ErrInjected is a failure the service was told to inject.
var ErrInjected = errors.New("fault injected")

// firstTime reports whether id has not been seen by this process yet and
// is one the faults apply to.
func (s *Service) firstTime(id idem.Identity) bool {
	if s.Faults.Every > 1 && int(binary.BigEndian.Uint32(sha(id))%uint32(s.Faults.Every)) != 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[idem.Identity]bool{}
	}
	first := !s.seen[id]
	s.seen[id] = true
	return first
}

func (s *Service) logf(format string, args ...any) {
	if s.Logf != nil {
		s.Logf(format, args...)
	}
}

// Transfer handles one transfer request (the NATS consumer's path): the
// whole protocol in one transaction (idem.ExecuteFunc), with the provider
// charged inside the effect.
func (s *Service) Transfer(ctx context.Context, id idem.Identity, payload []byte) (idem.Result, error) {
	first := s.firstTime(id)
	if first && s.Faults.Slow > 0 {
		time.Sleep(s.Faults.Slow)
	}
	cmd := idem.Command{Identity: id, Class: AppClass, Payload: payload}
	res, err := idem.ExecuteFunc(ctx, s.Pool, cmd, func(ctx context.Context, tx pgx.Tx) (json.RawMessage, error) {
		return s.effect(ctx, tx, id, payload, first)
	})
	if err == nil && first && s.Faults.CrashAfterCommit {
		s.crashAfterCommit(id)
	}
	return res, err
}

// effect is the transfer: the provider's charge (outside the transaction,
// with a key derived from the identity), then the posting in tx.
func (s *Service) effect(ctx context.Context, tx pgx.Tx, id idem.Identity, payload []byte, first bool) (json.RawMessage, error) {
	charge, err := s.charge(ctx, id, payload)
	if err != nil {
		return nil, err
	}
	if first && s.Faults.CrashAfterProvider {
		s.logf("fault: crash after the provider charged %s, before the commit", id)
		crash()
	}
	var posting map[string]any
	if err := tx.QueryRow(ctx, "SELECT demo.transfer_effect($1, $2, $3::jsonb)", id.TenantID, id.OperationID, string(payload)).
		Scan(&posting); err != nil {
		return nil, err
	}
	posting["charge_id"] = charge
	if first && s.Faults.FailBeforeCommit {
		return nil, fmt.Errorf("%w: failing %s before the commit, after the provider charged", ErrInjected, id)
	}
	return json.Marshal(posting)
}

func (s *Service) crashAfterCommit(id idem.Identity) {
	s.logf("fault: crash after committing %s, before replying", id)
	crash()
}

// ProviderKey is the key the service passes to the provider for an
// identity: derived from it, so that a re-drive reaches the same charge.
func ProviderKey(id idem.Identity) string { return idemhttp.DeriveKey(providerNamespace, id) }

// providerNamespace separates the demo provider's keys (idemhttp.DeriveKey).
const providerNamespace = "demo-provider"

func sha(id idem.Identity) []byte {
	b, _ := hex.DecodeString(ProviderKey(id))
	return b
}

// charge asks the fake provider to charge: its own statement, committed at
// once, outside the caller's transaction. A repeated key returns the first
// charge (and counts the request).
func (s *Service) charge(ctx context.Context, id idem.Identity, payload []byte) (string, error) {
	var p struct {
		Amount   int64  `json:"amount"`
		Currency string `json:"currency"`
	}
	if err := json.Unmarshal(payload, &p); err != nil {
		return "", fmt.Errorf("demo.transfer_app: %w", err)
	}
	provider := s.Provider
	if provider == nil {
		provider = s.Pool
	}
	var chargeID string
	err := provider.QueryRow(ctx, `INSERT INTO demo.provider_charge (provider_key, tenant_id, operation_id, amount, currency)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (provider_key) DO UPDATE SET requests = demo.provider_charge.requests + 1
		RETURNING charge_id::text`, ProviderKey(id), id.TenantID, id.OperationID, p.Amount, p.Currency).Scan(&chargeID)
	if err != nil {
		return "", fmt.Errorf("provider charge: %w", err)
	}
	return chargeID, nil
}

// Handler serves POST /transfers through the idemhttp middleware (the
// Idempotency-Key header holds the operation id, Idem-Tenant the tenant, the
// body the payload) and GET /healthz. A new transfer is answered 200 with the
// posting (and the provider's charge id), saved with the identity; a retry
// gets the saved answer with Idempotent-Replayed: true; 422 when the identity
// holds another payload (quarantined); 409 while a first attempt is in
// flight; 400 for a bad request; 500 when the transfer failed (nothing
// recorded). Every answer names the database in the Idem-Database header.
func (s *Service) Handler() http.Handler {
	mw, err := idemhttp.New(idemhttp.Config{
		DB:           s.Pool,
		Class:        AppClass,
		Tenant:       idemhttp.TenantHeader(redrive.DefaultTenantHeader),
		KeyNamespace: providerNamespace,
		AfterCommit: func(r *http.Request, _ idem.Result) {
			if first, _ := r.Context().Value(firstKey{}).(bool); first && s.Faults.CrashAfterCommit {
				id, _ := idemhttp.Identity(r.Context())
				s.crashAfterCommit(id)
			}
		},
		Logf: s.Logf,
	})
	if err != nil {
		panic(err) // only a nil pool or class, a programming error
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.Handle("POST /transfers", s.faults(mw.Wrap(http.HandlerFunc(s.serveTransfer))))
	return mux
}

type firstKey struct{}

// faults applies the faults that act before the middleware: an answer
// without recording, a slow first attempt. It marks whether this is the
// identity's first request, for the faults inside the handler.
func (s *Service) faults(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := idem.Identity{TenantID: r.Header.Get(redrive.DefaultTenantHeader),
			OperationID: redrive.ParseIdempotencyKey(r.Header.Get("Idempotency-Key"))}
		first := id.Validate() == nil && s.firstTime(id)
		if first && s.Faults.AckWithoutRecord {
			s.logf("fault: answering 200 for %s without recording it", id)
			reply(w, http.StatusOK, map[string]any{"note": "not recorded"})
			return
		}
		if first && s.Faults.Slow > 0 {
			time.Sleep(s.Faults.Slow)
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), firstKey{}, first)))
	})
}

// serveTransfer is the handler behind the middleware: it runs only for a new
// identity, inside the transaction that records it.
func (s *Service) serveTransfer(w http.ResponseWriter, r *http.Request) {
	id, _ := idemhttp.Identity(r.Context())
	first, _ := r.Context().Value(firstKey{}).(bool)
	payload, err := io.ReadAll(r.Body)
	if err != nil {
		reply(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
		return
	}
	posting, err := s.effect(r.Context(), idemhttp.Tx(r.Context()), id, payload, first)
	if err != nil {
		s.logf("%s: %v", id, err)
		reply(w, http.StatusInternalServerError, map[string]any{"error": err.Error()})
		return
	}
	s.logf("%s: applied", id)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(posting)
}

func reply(w http.ResponseWriter, status int, body map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func isBadRequest(err error) bool {
	for _, e := range []error{idem.ErrInvalidJSON, idem.ErrInvalidIdentity, idem.ErrPayloadTooLarge, idem.ErrDuplicateKey,
		idem.ErrLossyNumber, idem.ErrTooDeep, idem.ErrNUL} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
