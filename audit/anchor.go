package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// ErrAnchorFile: the anchor file cannot be read, does not parse, or others
// may read or write it. It is never replaced silently: the verifier looks
// at it (it may be the evidence of a rewrite) and moves or repairs it.
var ErrAnchorFile = errors.New("the audit anchor file is unusable")

// AnchorFileEnv names the anchor file when --anchor-file is not given.
const AnchorFileEnv = "IDEMCTL_AUDIT_ANCHOR_FILE"

// keepEarlier is how many earlier verified heads a database's entry keeps,
// so that a rewrite is placed between two of them.
const keepEarlier = 16

// KeptAnchor is what a verifier keeps of one database: the head it last
// verified intact, when, and some heads verified before it (oldest first).
type KeptAnchor struct {
	ID         int64     `json:"id"`
	Hash       string    `json:"hash"`
	VerifiedAt time.Time `json:"verified_at"`
	Earlier    []Anchor  `json:"earlier,omitempty"`
}

// Anchor returns the kept head as an Anchor.
func (k KeptAnchor) Anchor() Anchor { return Anchor{ID: k.ID, Hash: k.Hash} }

// MarshalJSON writes an anchor as {"id":N,"hash":"sha256:..."}.
func (a Anchor) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ID   int64  `json:"id"`
		Hash string `json:"hash"`
	}{a.ID, a.Hash})
}

// UnmarshalJSON reads what MarshalJSON writes, and checks it.
func (a *Anchor) UnmarshalJSON(b []byte) error {
	var v struct {
		ID   int64  `json:"id"`
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	p, err := ParseAnchor(fmt.Sprintf("%d:%s", v.ID, v.Hash))
	if err != nil {
		return err
	}
	*a = p
	return nil
}

// anchorFile is the file's content: one entry per database verified.
type anchorFile struct {
	Version   int                   `json:"version"`
	Databases map[string]KeptAnchor `json:"databases"`
}

// AnchorStore is a verifier's file of kept anchors, outside the database:
// whoever controls the database cannot reach it. It is written mode 0600
// (its directory 0700), atomically.
type AnchorStore struct {
	Path string
}

// DefaultAnchorPath is $IDEMCTL_AUDIT_ANCHOR_FILE, else
// $XDG_STATE_HOME/idemctl/audit-anchors.json (~/.local/state/...).
func DefaultAnchorPath() (string, error) {
	if p := os.Getenv(AnchorFileEnv); p != "" {
		return p, nil
	}
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("where to keep the audit anchor: %w (pass --anchor-file or set %s)", err, AnchorFileEnv)
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "idemctl", "audit-anchors.json"), nil
}

// read returns the file's content; a missing file is an empty one.
func (s AnchorStore) read() (anchorFile, bool, error) {
	f := anchorFile{Version: 1, Databases: map[string]KeptAnchor{}}
	st, err := os.Stat(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, false, nil
	}
	if err != nil {
		return f, false, fmt.Errorf("%w: %s: %v", ErrAnchorFile, s.Path, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return f, true, fmt.Errorf("%w: %s has mode %04o: others may read or change it (check its content, then chmod 600 it)",
			ErrAnchorFile, s.Path, st.Mode().Perm())
	}
	raw, err := os.ReadFile(s.Path)
	if err != nil {
		return f, true, fmt.Errorf("%w: %s: %v", ErrAnchorFile, s.Path, err)
	}
	if err := json.Unmarshal(raw, &f); err != nil || f.Version != 1 || f.Databases == nil {
		return f, true, fmt.Errorf("%w: %s is corrupt (not the anchors idemctl audit verify writes); it is left as it is: move it aside to start again", ErrAnchorFile, s.Path)
	}
	return f, true, nil
}

// Load returns the anchor kept for database key, or nil when the file or
// its entry does not exist yet (a first run). An unreadable or corrupt file
// is ErrAnchorFile.
func (s AnchorStore) Load(key string) (*KeptAnchor, error) {
	f, _, err := s.read()
	if err != nil {
		return nil, err
	}
	k, ok := f.Databases[key]
	if !ok {
		return nil, nil
	}
	return &k, nil
}

// Latest returns, among the entries whose key match accepts, the one
// verified last and its key, or nil when none matches.
func (s AnchorStore) Latest(match func(key string) bool) (string, *KeptAnchor, error) {
	f, _, err := s.read()
	if err != nil {
		return "", nil, err
	}
	var (
		key  string
		kept *KeptAnchor
	)
	for k, a := range f.Databases {
		if !match(k) {
			continue
		}
		if kept == nil || a.VerifiedAt.After(kept.VerifiedAt) || (a.VerifiedAt.Equal(kept.VerifiedAt) && k < key) {
			a := a
			key, kept = k, &a
		}
	}
	return key, kept, nil
}

// Keep records head as database key's anchor, verified at now, keeping the
// previous head among the earlier ones. The file is re-read first, so an
// entry of another database written meanwhile is kept, and a file that went
// corrupt is not replaced.
func (s AnchorStore) Keep(key string, head Anchor, now time.Time) (KeptAnchor, error) {
	f, _, err := s.read()
	if err != nil {
		return KeptAnchor{}, err
	}
	k := KeptAnchor{ID: head.ID, Hash: head.Hash, VerifiedAt: now.UTC()}
	if old, ok := f.Databases[key]; ok {
		k.Earlier = append(old.Earlier, old.Anchor())
		sort.Slice(k.Earlier, func(i, j int) bool { return k.Earlier[i].ID < k.Earlier[j].ID })
		dedup := k.Earlier[:0]
		for _, a := range k.Earlier {
			if a.ID != head.ID && (len(dedup) == 0 || dedup[len(dedup)-1].ID != a.ID) {
				dedup = append(dedup, a)
			}
		}
		k.Earlier = dedup
		if len(k.Earlier) > keepEarlier {
			k.Earlier = k.Earlier[len(k.Earlier)-keepEarlier:]
		}
	}
	f.Databases[key] = k
	raw, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return KeptAnchor{}, err
	}
	if err := os.MkdirAll(filepath.Dir(s.Path), 0o700); err != nil {
		return KeptAnchor{}, fmt.Errorf("keep the audit anchor: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.Path), ".audit-anchors-*")
	if err != nil {
		return KeptAnchor{}, fmt.Errorf("keep the audit anchor: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return KeptAnchor{}, fmt.Errorf("keep the audit anchor: %w", err)
	}
	if _, err := tmp.Write(append(raw, '\n')); err != nil {
		tmp.Close()
		return KeptAnchor{}, fmt.Errorf("keep the audit anchor: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return KeptAnchor{}, fmt.Errorf("keep the audit anchor: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return KeptAnchor{}, fmt.Errorf("keep the audit anchor: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.Path); err != nil {
		return KeptAnchor{}, fmt.Errorf("keep the audit anchor: %w", err)
	}
	return k, nil
}

// VerifyKept is Verify with the anchors a verifier kept (nil on a first
// run) besides the ones given, and says what moved since the kept head was
// verified: rows rewritten (an anchored row's hash changed), rows missing
// and the head moved back (the log now ends before the kept head).
// Like Verify, it reads in one snapshot.
func VerifyKept(ctx context.Context, db DBTX, kept *KeptAnchor, anchors ...Anchor) (Report, error) {
	var r Report
	err := inSnapshot(ctx, db, func(q DBTX) (err error) {
		r, err = verifyKept(ctx, q, kept, anchors)
		return err
	})
	return r, err
}

func verifyKept(ctx context.Context, db DBTX, kept *KeptAnchor, anchors []Anchor) (Report, error) {
	if kept != nil {
		anchors = append(append(anchors, kept.Earlier...), kept.Anchor())
	}
	r, err := verify(ctx, db, anchors)
	if err != nil || kept == nil {
		return r, err
	}
	// Verify stops at the first broken row: how far the log goes now is
	// read apart, so that rows cut from its end are said as well.
	var last int64
	if err := db.QueryRow(ctx, "SELECT coalesce(max(id), 0) FROM idem.audit").Scan(&last); err != nil {
		return Report{}, fmt.Errorf("verify audit log: %w", err)
	}
	if last >= kept.ID {
		return r, nil
	}
	missing := fmt.Sprintf("the log ends at row %d but row %d was verified on %s: rows %d-%d are missing and the head is behind the anchor",
		last, kept.ID, kept.VerifiedAt.Format(time.RFC3339), last+1, kept.ID)
	if !r.Intact && r.BrokenAt <= last {
		r.Problem += "; and " + missing
		return r, nil
	}
	return r.broken(last+1, missing)
}
