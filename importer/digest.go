package importer

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"hash"
	"time"
)

// digestRun is how many items each inner digest of an items digest covers.
const digestRun = 4096

// itemsDigest is what a plan keeps of its items instead of an item a row:
// sha256 over the sha256 of each run of digestRun items in the order they
// were read, an item being its fingerprint, the length of its evidence (4
// bytes, big-endian) and the evidence; with the counts and the first items
// as a sample. idem.import_run_digest computes the same over the rows the
// run staged, in the order it copied them.
type itemsDigest struct {
	run, all       hash.Hash
	n, hashOnly    int
	tenants        map[string]struct{}
	oldest, newest time.Time
	sample         []sampleItem
	lenBuf         [4]byte
}

type sampleItem struct {
	TenantID    string `json:"tenant_id"`
	OperationID string `json:"operation_id"`
	CreatedAt   string `json:"created_at"`
	Evidence    string `json:"evidence"`
}

func newItemsDigest() *itemsDigest {
	return &itemsDigest{run: sha256.New(), all: sha256.New(), tenants: map[string]struct{}{}}
}

func (d *itemsDigest) add(v Verdict) {
	fp := v.Fingerprint()
	d.run.Write(fp[:])
	binary.BigEndian.PutUint32(d.lenBuf[:], uint32(len(v.Item.Evidence)))
	d.run.Write(d.lenBuf[:])
	d.run.Write([]byte(v.Item.Evidence))
	d.n++
	if d.n%digestRun == 0 {
		d.all.Write(d.run.Sum(nil))
		d.run.Reset()
	}
	at := v.CreatedAt.Truncate(time.Microsecond)
	if d.n == 1 || at.Before(d.oldest) {
		d.oldest = at
	}
	if d.n == 1 || at.After(d.newest) {
		d.newest = at
	}
	if v.StoreHash != "" {
		d.hashOnly++
	}
	if _, ok := d.tenants[v.Item.TenantID]; !ok {
		d.tenants[v.Item.TenantID] = struct{}{}
	}
	if len(d.sample) < 5 {
		d.sample = append(d.sample, sampleItem{TenantID: v.Item.TenantID, OperationID: v.Item.OperationID,
			CreatedAt: formatMicro(at), Evidence: v.Item.Evidence})
	}
}

// sum is the items digest; called once, after the last add.
func (d *itemsDigest) sum() []byte {
	if d.n%digestRun != 0 {
		d.all.Write(d.run.Sum(nil))
	}
	return d.all.Sum(nil)
}

// counts are idem.import_plan_seal_digest's p_items and p_sample.
func (d *itemsDigest) counts(class string) (items, sample string) {
	raw, _ := json.Marshal(map[string]any{"items": d.n, "tenants": len(d.tenants), "hash_only": d.hashOnly,
		"oldest": formatMicro(d.oldest), "newest": formatMicro(d.newest), "class": class})
	s, _ := json.Marshal(d.sample)
	return string(raw), string(s)
}

func formatMicro(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.999999Z07:00") }
