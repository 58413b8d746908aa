package idemhttp_test

import (
	"context"
	"encoding/json"
	"log"
	"net/http"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/idemhttp"
)

// A payments service behind the middleware: the handler charges the provider
// with the derived key, then writes its ledger row in the request's
// transaction; the middleware commits that row with the identity and the
// saved response. The class is registered once with no SQL effect:
//
//	SELECT idem.register_class('payments.charge', NULL, 'forever');
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("APP_DSN")) // a login granted idem_app
	if err != nil {
		log.Fatal(err)
	}
	mw, err := idemhttp.New(idemhttp.Config{
		DB:     pool,
		Class:  "payments.charge",
		Tenant: idemhttp.TenantHeader("X-Merchant"),
	})
	if err != nil {
		log.Fatal(err)
	}
	charge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Amount   int64  `json:"amount"`
			Currency string `json:"currency"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest) // saved: a retry gets the same 400
			return
		}
		// The provider de-duplicates on this key: a retry after a crash
		// between its answer and our commit reaches the same charge.
		providerID, err := chargeAtProvider(r.Context(), idemhttp.DownstreamKey(r.Context()), in.Amount, in.Currency)
		if err != nil {
			http.Error(w, "provider unavailable", http.StatusBadGateway) // 5xx: rolled back, a retry runs again
			return
		}
		id, _ := idemhttp.Identity(r.Context())
		if _, err := idemhttp.Tx(r.Context()).Exec(r.Context(),
			"INSERT INTO payments.ledger (merchant, operation_id, amount, currency, provider_id) VALUES ($1, $2, $3, $4, $5)",
			id.TenantID, id.OperationID, in.Amount, in.Currency, providerID); err != nil {
			http.Error(w, "ledger write failed", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"charge": providerID, "amount": in.Amount, "currency": in.Currency})
	})
	mux := http.NewServeMux()
	mux.Handle("POST /charges", mw.Wrap(charge))
	if os.Getenv("APP_DSN") != "" {
		log.Fatal(http.ListenAndServe("127.0.0.1:8080", mux))
	}
}

// chargeAtProvider stands for a payment provider's client, called with an
// idempotency key.
func chargeAtProvider(_ context.Context, key string, _ int64, _ string) (string, error) {
	return "ch_" + key[:12], nil
}
