package quarantine

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemctl/idemctl/idem"
)

var (
	//go:embed sql/groups.sql
	groupsSQLFile string
	groupsSQL     = withFilter(groupsSQLFile)
)

// GroupBy says which optional dimensions split the groups besides the class
// pair and the set of differing fields.
type GroupBy struct {
	Tenant bool `json:"tenant,omitempty"`
	Source bool `json:"source,omitempty"`
}

// prefix is the group id's prefix, which carries the dimensions so that an id
// alone can be resolved: g (class and fields), gt (and tenant), gs (and
// source), gts (both).
func (b GroupBy) prefix() string {
	p := "g"
	if b.Tenant {
		p += "t"
	}
	if b.Source {
		p += "s"
	}
	return p
}

// GroupKey is what the records of one group share.
type GroupKey struct {
	Class         string   `json:"class"`
	IncomingClass string   `json:"incoming_class"`
	Fields        []string `json:"fields"`
	// Tenant and Source are set when the groups were split by them.
	Tenant *string `json:"tenant,omitempty"`
	Source *string `json:"source,omitempty"`
}

// Describe says what the group's records share: "class C -> D, changed /a /b,
// source S".
func (k GroupKey) Describe() string {
	class := k.Class
	if k.IncomingClass != k.Class {
		class += " -> " + k.IncomingClass
	}
	fields := strings.Join(k.Fields, " ")
	if fields == "" {
		fields = "(class only)"
	}
	s := "class " + class + ", changed " + fields
	if k.Tenant != nil {
		s += ", tenant " + *k.Tenant
	}
	if k.Source != nil {
		src := *k.Source
		if src == "" {
			src = "-"
		}
		s += ", source " + src
	}
	return s
}

// Changed says what differs in a group's records, for a screen: the JSON
// Pointers; "stored body purged <date>" when the stored side is gone (no
// field can be compared); "(class only)" when only the class differs;
// "(whole payload)" when the payloads differ at their root.
func (g Group) Changed() string {
	if g.StoredPurged && (len(g.Fields) == 0 || (len(g.Fields) == 1 && g.Fields[0] == "")) {
		if g.StoredPurgedAt == nil {
			return "stored body purged"
		}
		return "stored body purged " + g.StoredPurgedAt.UTC().Format("2006-01-02")
	}
	switch {
	case len(g.Fields) == 0:
		return "(class only)"
	case len(g.Fields) == 1 && g.Fields[0] == "":
		return "(whole payload)"
	}
	return strings.Join(g.Fields, " ")
}

// Group is one group of open records: the same cause, most likely.
type Group struct {
	// ID names the group for --group: stable as long as its key is (a new
	// record with the same key joins the same group).
	ID string `json:"id"`
	GroupKey
	Count     int64     `json:"count"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	// StoredPurged: a record of the group conflicts with an identity whose
	// stored body was purged (under a proven horizon) before the conflict,
	// so only the class and the hash are compared; StoredPurgedAt is the
	// latest such purge (nil: unknown).
	StoredPurged   bool       `json:"stored_purged,omitempty"`
	StoredPurgedAt *time.Time `json:"stored_purged_at,omitempty"`
	// Example is the group's newest record.
	Example struct {
		ID          int64  `json:"id"`
		Tenant      string `json:"tenant"`
		OperationID string `json:"operation_id"`
	} `json:"example"`
}

// GroupOptions are the input of Groups.
type GroupOptions struct {
	// Filter narrows the open records first (its Status is ignored: groups
	// are of open records).
	Filter Filter
	By     GroupBy
	// Limit is the number of groups returned, largest first (DefaultLimit when 0, at most MaxLimit).
	Limit int
}

// Groups groups the open records matching a filter by class pair and set of
// differing fields (and by tenant, by source), largest first.
func Groups(ctx context.Context, db idem.DBTX, o GroupOptions) ([]Group, error) {
	f := o.Filter
	f.Status, f.Limit, f.After = StatusOpen, o.Limit, nil
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if f.Limit == 0 {
		f.Limit = DefaultLimit
	}
	args := f.args()
	args["by_tenant"], args["by_source"], args["limit"] = o.By.Tenant, o.By.Source, f.Limit
	rows, err := db.Query(ctx, groupsSQL, pgx.QueryExecModeExec, args)
	if err != nil {
		return nil, fmt.Errorf("group quarantine: %w", err)
	}
	groups, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Group, error) {
		var g Group
		err := r.Scan(&g.Class, &g.IncomingClass, &g.Fields, &g.Tenant, &g.Source, &g.Count, &g.FirstSeen, &g.LastSeen,
			&g.Example.ID, &g.Example.Tenant, &g.Example.OperationID, &g.StoredPurged, &g.StoredPurgedAt)
		if g.Fields == nil {
			g.Fields = []string{}
		}
		g.ID = o.By.prefix() + "-" + g.GroupKey.hash()
		return g, err
	})
	if err != nil {
		return nil, fmt.Errorf("group quarantine: %w", err)
	}
	return groups, nil
}

// hash is the key's part of a group id: 12 hex digits of the SHA-256 of its
// JSON form.
func (k GroupKey) hash() string {
	b, _ := json.Marshal(k)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

var groupIDRE = regexp.MustCompile(`^g(t?)(s?)-[0-9a-f]{12}$`)

// ValidGroupID reports whether id has the form of a group id.
func ValidGroupID(id string) bool { return groupIDRE.MatchString(id) }

// ResolveGroup finds the open group with this id, among the groups of the
// open records matching the filter, and returns the filter narrowed to it.
// ErrNotFound when no open record has that key any more (all decided, or a
// mistyped id).
func ResolveGroup(ctx context.Context, db idem.DBTX, id string, within Filter) (Filter, Group, error) {
	m := groupIDRE.FindStringSubmatch(id)
	if m == nil {
		return Filter{}, Group{}, fmt.Errorf("%w: --group %q: use an id printed by idemctl quarantine groups (g-1a2b3c4d5e6f)", ErrInvalidFilter, id)
	}
	groups, err := Groups(ctx, db, GroupOptions{Filter: within, By: GroupBy{Tenant: m[1] != "", Source: m[2] != ""}, Limit: MaxLimit})
	if err != nil {
		return Filter{}, Group{}, err
	}
	for _, g := range groups {
		if g.ID == id {
			f := within
			f.Status = StatusOpen
			key := g.GroupKey
			f.Group = &key
			return f, g, nil
		}
	}
	return Filter{}, Group{}, fmt.Errorf("%w: group %s has no open record (all decided, a mistyped id, or another filter): idemctl quarantine groups lists the open groups", ErrNotFound, id)
}
