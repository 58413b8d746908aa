package health

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

var (
	//go:embed sql/classes.sql
	classesSQL string
	//go:embed sql/source_probes.sql
	sourceProbesSQL string
)

// Status is what an on-call engineer or a dashboard reads about one
// database, at one instant of the primary's clock.
type Status struct {
	At         time.Time `json:"at"`
	Quarantine struct {
		Open       int64      `json:"open"`
		OldestOpen *time.Time `json:"oldest_open"`
	} `json:"quarantine"`
	Classes []ClassStatus `json:"classes"`
	// PartitionsUntil is the upper bound of the last daily inbox partition
	// (nil: none but the default one).
	PartitionsUntil *time.Time     `json:"partitions_until"`
	Sources         []SourceStatus `json:"sources"`
}

// ClassStatus is one class's numbers.
type ClassStatus struct {
	Class     string `json:"class"`
	Retention string `json:"retention"`
	// LastHour and LastDay count identities created (operations applied).
	LastHour int64 `json:"operations_last_hour"`
	LastDay  int64 `json:"operations_last_day"`
	// Bodies is how many payloads and responses the inbox keeps; OldestBody
	// the oldest of them (what a purge would start with).
	Bodies     int64      `json:"inbox_bodies"`
	OldestBody *time.Time `json:"oldest_body"`
	LastPurge  *time.Time `json:"last_purge"`
}

// SourceStatus is a replay source and its last probe (the evidence of the
// newest plan that probed it; nil: never probed).
type SourceStatus struct {
	Name      string     `json:"name"`
	Kind      string     `json:"kind"`
	LastProbe *time.Time `json:"last_probe"`
	Verdict   string     `json:"verdict,omitempty"`
}

// ReadStatus reads the numbers. It reads the whole inbox body once.
func ReadStatus(ctx context.Context, pool *pgxpool.Pool) (Status, error) {
	var st Status
	if err := pool.QueryRow(ctx, quarantineOpenSQL).Scan(&st.Quarantine.Open, &st.Quarantine.OldestOpen, &st.At); err != nil {
		return st, fmt.Errorf("read the quarantine: %w", err)
	}
	var inDefault float64
	var now time.Time
	if err := pool.QueryRow(ctx, partitionsAheadSQL).Scan(&st.PartitionsUntil, &now, &inDefault); err != nil {
		return st, fmt.Errorf("read the partitions: %w", err)
	}
	rows, err := pool.Query(ctx, classesSQL)
	if err != nil {
		return st, fmt.Errorf("read the classes: %w", err)
	}
	for rows.Next() {
		var c ClassStatus
		if err := rows.Scan(&c.Class, &c.Retention, &c.LastHour, &c.LastDay, &c.Bodies, &c.OldestBody, &c.LastPurge); err != nil {
			rows.Close()
			return st, err
		}
		st.Classes = append(st.Classes, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("read the classes: %w", err)
	}
	rows, err = pool.Query(ctx, sourceProbesSQL)
	if err != nil {
		return st, fmt.Errorf("read the sources: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var s SourceStatus
		var verdict *string
		if err := rows.Scan(&s.Name, &s.Kind, &s.LastProbe, &verdict); err != nil {
			return st, err
		}
		if verdict != nil {
			s.Verdict = *verdict
		}
		st.Sources = append(st.Sources, s)
	}
	return st, rows.Err()
}

// WritePrometheus writes st in the Prometheus text format, for
// node_exporter's textfile collector (write to a temporary file, then rename).
func (st Status) WritePrometheus(w io.Writer) error {
	var b strings.Builder
	metric := func(name, help string) {
		fmt.Fprintf(&b, "# HELP idemctl_%s %s\n# TYPE idemctl_%s gauge\n", name, help, name)
	}
	sample := func(name string, labels map[string]string, v float64) {
		fmt.Fprintf(&b, "idemctl_%s%s %s\n", name, promLabels(labels), promValue(v))
	}
	ts := func(t *time.Time) float64 {
		if t == nil {
			return 0
		}
		return float64(t.UnixMilli()) / 1000
	}
	metric("quarantine_open", "Open quarantine records.")
	sample("quarantine_open", nil, float64(st.Quarantine.Open))
	metric("quarantine_oldest_open_timestamp_seconds", "When the oldest open quarantine record was first seen (0: none).")
	sample("quarantine_oldest_open_timestamp_seconds", nil, ts(st.Quarantine.OldestOpen))
	metric("operations", "Operations applied (identities created) per class in the window.")
	for _, c := range st.Classes {
		sample("operations", map[string]string{"class": c.Class, "window": "1h"}, float64(c.LastHour))
		sample("operations", map[string]string{"class": c.Class, "window": "1d"}, float64(c.LastDay))
	}
	metric("inbox_bodies", "Payloads and responses the inbox keeps per class.")
	for _, c := range st.Classes {
		sample("inbox_bodies", map[string]string{"class": c.Class}, float64(c.Bodies))
	}
	metric("inbox_oldest_body_timestamp_seconds", "Creation time of the oldest body the inbox keeps per class (0: none).")
	for _, c := range st.Classes {
		sample("inbox_oldest_body_timestamp_seconds", map[string]string{"class": c.Class}, ts(c.OldestBody))
	}
	metric("last_purge_timestamp_seconds", "When the last purge of the class finished (0: never).")
	for _, c := range st.Classes {
		sample("last_purge_timestamp_seconds", map[string]string{"class": c.Class}, ts(c.LastPurge))
	}
	metric("partitions_until_timestamp_seconds", "Upper bound of the last daily inbox partition (0: none).")
	sample("partitions_until_timestamp_seconds", nil, ts(st.PartitionsUntil))
	metric("source_last_probe_timestamp_seconds", "When each replay source was last probed for a plan (0: never).")
	for _, s := range st.Sources {
		sample("source_last_probe_timestamp_seconds", map[string]string{"source": s.Name, "kind": s.Kind}, ts(s.LastProbe))
	}
	metric("source_closed", "1 when the source's last probe found it closed, else 0.")
	for _, s := range st.Sources {
		v := 0.0
		if s.Verdict == "closed" {
			v = 1
		}
		sample("source_closed", map[string]string{"source": s.Name, "kind": s.Kind}, v)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// promLabels renders {k="v",...} in key order, values escaped as the text
// format requires.
func promLabels(labels map[string]string) string {
	if len(labels) == 0 {
		return ""
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	esc := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + `="` + esc.Replace(labels[k]) + `"`
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func promValue(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.3f", v)
}
