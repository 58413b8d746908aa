// Package oncitus holds idemctl's tests on a real Citus cluster: a
// coordinator and two workers started by internal/citustest for the test
// binary. `make test-citus` runs them (building Citus first when it is
// missing), and so does `make test` wherever Citus is installed; without
// Citus every test skips and says so loudly.
//
// The tests share one cluster and one idem schema: an inbox that holds data
// before it is distributed (the path of a single-node inbox that outgrew its
// machine), then distributed by `migrate` with the demo ledger. Each test uses
// its own tenants.
package oncitus
