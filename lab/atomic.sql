-- atomic: the Core executor (migrations/001_core.sql), installed in the scratch
-- schema. The inbox row, the effect and the saved response commit together.

-- name: schema
SELECT scratch.register_class('lab.transfer', 'scratch.transfer_effect(text,text,jsonb)'::regprocedure,
    'forever', 'idemctl lab: the demo ledger transfer in a scratch schema');

-- name: execute
-- One call: claim, effect, complete (idem.execute).
SELECT outcome, response FROM scratch.execute($1, $2, 'lab.transfer', $3::jsonb, $4)

-- name: claim
-- The same protocol in three calls, as idem.ExecuteFunc runs it.
SELECT outcome, response FROM scratch.claim($1, $2, 'lab.transfer', $3::jsonb, $4)

-- name: complete
SELECT scratch.complete($1, $2, $3::jsonb)
