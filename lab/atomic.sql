-- atomic: the Core executor (migrations and their code package), installed in
-- the scratch schema. The inbox row, the effect and the saved response commit
-- together. The payload is the canonical text, which the executor hashes again.

-- name: schema
-- The lab's login owns the scratch schema, the ledger's effect included, so
-- it registers the class by hand (idem.register_class refuses an effect owned
-- by the schema's owner) and rebuilds the dispatcher as registration does.
INSERT INTO scratch.op_class (name, effect, retention, description)
VALUES ('lab.transfer', 'scratch.transfer_effect(text,text,jsonb)'::regprocedure, 'forever',
        'idemctl lab: the demo ledger transfer in a scratch schema');
-- The claim path's class: the same transfer as application code (the lab
-- runs the effect between claim and complete), since claim refuses a class
-- whose effect is SQL.
INSERT INTO scratch.op_class (name, effect, retention, description)
VALUES ('lab.transfer_app', NULL, 'forever',
        'idemctl lab: the demo ledger transfer as application code');
SELECT scratch.rebuild_dispatch();

-- name: execute
-- One call: claim, effect, complete (idem.execute).
SELECT outcome, response FROM scratch.execute($1, $2, 'lab.transfer', $3, $4)

-- name: claim
-- The same protocol in three calls, as idem.ExecuteFunc runs it.
SELECT outcome, response FROM scratch.claim($1, $2, 'lab.transfer_app', $3, $4)

-- name: complete
SELECT scratch.complete($1, $2, $3::jsonb)
