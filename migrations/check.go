package migrations

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// generated are the functions the code package generates rather than holds.
var generated = map[string]bool{
	"function idem.run_effect(text,text,text,jsonb,oid)":                true,
	"function idem.inbox_body_read(text,text,timestamp with time zone)": true,
}

// ofMigrations are the functions a numbered migration defines because a
// table's constraint calls them: part of the table, changed only by a new
// migration that validates it again. Internal helpers, granted to nobody.
var ofMigrations = map[string]bool{
	"function idem.identity_row_valid(text,text,bytea,integer)": true,
}

// Check compares every privilege in schema idem with what the code package
// declares and returns what differs, one line each (none when all is as
// installed):
//   - every object is owned by the owner role;
//   - every function is SECURITY DEFINER with search_path pinned to
//     pg_catalog first and pg_temp last, and is executable by exactly the
//     roles its file grants it to (never PUBLIC); but an internal helper,
//     granted to nobody, may instead be SECURITY INVOKER without a
//     search_path of its own (it is called only by the owner's functions,
//     whose search_path is pinned, and a SET clause costs every call);
//   - no role but the owner may write a table, a sequence or a column; only
//     the operator and auditor roles may read them;
//   - only the owner may create in the schema;
//   - every object of the code package is recorded as installed from this
//     binary's version of its file (migrate reinstalls it otherwise).
func Check(ctx context.Context, conn *pgx.Conn, r Roles) ([]string, error) {
	objs, err := Code()
	if err != nil {
		return nil, err
	}
	var problems []string
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL search_path = pg_catalog"); err != nil {
			return err
		}
		declared, p, err := declaredFunctions(ctx, tx, objs, r)
		problems = append(problems, p...)
		if err != nil {
			return err
		}
		p, err = checkFunctions(ctx, tx, r, declared)
		problems = append(problems, p...)
		if err != nil {
			return err
		}
		p, err = checkRelations(ctx, tx, r, objs)
		problems = append(problems, p...)
		if err != nil {
			return err
		}
		p, err = checkInstalled(ctx, tx, objs)
		problems = append(problems, p...)
		return err
	})
	return problems, err
}

// declaredFunctions maps each function of the code package, by its
// regprocedure text as the database spells it, to the roles it is granted to.
// A declared function that does not exist is a problem.
func declaredFunctions(ctx context.Context, tx pgx.Tx, objs []Object, r Roles) (map[string][]string, []string, error) {
	declared := map[string][]string{}
	var problems []string
	for _, o := range objs {
		if o.Kind != "function" {
			continue
		}
		var spelled *string
		if err := tx.QueryRow(ctx, "SELECT to_regprocedure($1)::text", o.Identity).Scan(&spelled); err != nil {
			return nil, nil, fmt.Errorf("check %s: %w", o.Identity, err)
		}
		if spelled == nil {
			problems = append(problems, "function "+o.Identity+" of the code package is missing")
			continue
		}
		roles := []string{}
		for _, k := range o.Grants {
			role, _ := r.kind(k)
			roles = append(roles, role)
		}
		declared["function "+*spelled] = roles
	}
	return declared, problems, nil
}

const functionsSQL = `
SELECT 'function ' || p.oid::regprocedure::text,
       p.proowner::regrole::text, p.prosecdef,
       coalesce((SELECT c FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%'), ''),
       coalesce((SELECT array_agg(CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END ORDER BY 1)
                 FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
                 WHERE a.grantee <> p.proowner), '{}')
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = 'idem'`

func checkFunctions(ctx context.Context, tx pgx.Tx, r Roles, declared map[string][]string) ([]string, error) {
	rows, err := tx.Query(ctx, functionsSQL)
	if err != nil {
		return nil, fmt.Errorf("check functions: %w", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var key, owner, path string
		var definer bool
		var grantees []string
		if err := rows.Scan(&key, &owner, &definer, &path, &grantees); err != nil {
			return nil, err
		}
		want, known := declared[key]
		if !known && !generated[key] && !ofMigrations[key] {
			problems = append(problems, key+" is not part of the code package")
			continue
		}
		if owner != r.Owner {
			problems = append(problems, fmt.Sprintf("%s is owned by %s, not %s", key, owner, r.Owner))
		}
		// An internal helper (granted to nobody) may run as its caller
		// without a search_path of its own: only the owner's functions,
		// whose search_path is pinned, can call it.
		internal := len(want) == 0 && !definer && path == ""
		if !definer && !internal {
			problems = append(problems, key+" is not SECURITY DEFINER")
		}
		if !internal && (!strings.HasPrefix(path, "search_path=pg_catalog,") || !strings.HasSuffix(path, ", pg_temp") && !strings.HasSuffix(path, ",pg_temp")) {
			problems = append(problems, fmt.Sprintf("%s does not pin search_path to pg_catalog first and pg_temp last (%q)", key, path))
		}
		sort.Strings(want)
		sort.Strings(grantees)
		if strings.Join(want, ",") != strings.Join(grantees, ",") {
			problems = append(problems, fmt.Sprintf("%s is executable by [%s], want [%s]", key, strings.Join(grantees, " "), strings.Join(want, " ")))
		}
	}
	return problems, rows.Err()
}

const relationsSQL = `
SELECT c.relkind::text, c.relname, c.relowner::regrole::text,
       coalesce((SELECT array_agg(DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
                                  || ':' || a.privilege_type)
                 FROM aclexplode(c.relacl) a WHERE a.grantee <> c.relowner), '{}'),
       EXISTS (SELECT 1 FROM pg_attribute t WHERE t.attrelid = c.oid AND t.attacl IS NOT NULL)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'idem' AND c.relkind IN ('r', 'p', 'v', 'S', 'm', 'f')
UNION ALL
SELECT 'schema', 'idem', n.nspowner::regrole::text,
       coalesce((SELECT array_agg(DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
                                  || ':' || a.privilege_type)
                 FROM aclexplode(n.nspacl) a WHERE a.grantee <> n.nspowner), '{}'),
       false
FROM pg_namespace n WHERE n.nspname = 'idem'`

func checkRelations(ctx context.Context, tx pgx.Tx, r Roles, objs []Object) ([]string, error) {
	views := map[string]map[string]bool{}
	for _, o := range objs {
		if o.Kind == "view" {
			allowed := map[string]bool{}
			for _, k := range o.Grants {
				role, _ := r.kind(k)
				allowed[role+":SELECT"] = true
			}
			views[strings.TrimPrefix(o.Identity, "idem.")] = allowed
		}
	}
	tableReaders := map[string]bool{r.Operator + ":SELECT": true, r.Auditor + ":SELECT": true}
	schemaUsers := map[string]bool{r.App + ":USAGE": true, r.Operator + ":USAGE": true, r.Auditor + ":USAGE": true}
	rows, err := tx.Query(ctx, relationsSQL)
	if err != nil {
		return nil, fmt.Errorf("check tables: %w", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var kind, name, owner string
		var grants []string
		var columnACL bool
		if err := rows.Scan(&kind, &name, &owner, &grants, &columnACL); err != nil {
			return nil, err
		}
		if owner != r.Owner {
			problems = append(problems, fmt.Sprintf("idem.%s is owned by %s, not %s", name, owner, r.Owner))
		}
		if columnACL {
			problems = append(problems, fmt.Sprintf("idem.%s has column privileges", name))
		}
		allowed := tableReaders
		switch kind {
		case "schema":
			allowed = schemaUsers
		case "v":
			allowed = views[name]
		case "S":
			allowed = nil
		}
		for _, g := range grants {
			if !allowed[g] {
				problems = append(problems, fmt.Sprintf("idem.%s grants %s", name, strings.Replace(g, ":", " ", 1)))
			}
		}
	}
	return problems, rows.Err()
}

// checkInstalled compares idem.code_object with the code package.
func checkInstalled(ctx context.Context, tx pgx.Tx, objs []Object) ([]string, error) {
	sums, err := loadObjects(ctx, tx)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, o := range objs {
		if sum, ok := sums[o.Key()]; ok && sum != o.Checksum {
			problems = append(problems, fmt.Sprintf("%s differs from the code package (idemctl migrate reinstalls it)", o.Key()))
		}
	}
	return problems, nil
}
