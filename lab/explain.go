package lab

import (
	"fmt"
	"io"
	"strings"
)

// DesignInfo describes a design for help texts and tables.
type DesignInfo struct {
	Name string
	// Does says what the design does; Summary what goes wrong when it runs.
	Does    string
	Summary string
	// Expected lists the anomaly columns the design exists to show.
	Expected []string
}

// Designs describes every design, in the order the lab runs them.
func Designs() []DesignInfo {
	out := make([]DesignInfo, len(designs))
	for i, d := range designs {
		out[i] = DesignInfo{Name: d.Name, Does: d.Does, Summary: d.Summary, Expected: d.Expect}
	}
	return out
}

// Explain writes what a design does, the step where it breaks, its kill
// points, and its SQL and Redis commands as the lab runs them (with
// "scratch." standing for the run's scratch schema).
func Explain(w io.Writer, name string) error {
	d, err := designByName(name)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "design %s: %s\n", d.Name, d.Does)
	fmt.Fprintf(w, "  what goes wrong: %s\n", d.Summary)
	fmt.Fprintf(w, "  where it breaks: %s\n", d.Breaks)
	if len(d.Expect) > 0 {
		fmt.Fprintf(w, "  shows up as:     %s\n", strings.Join(d.Expect, ", "))
	}
	if note := clientNotes[d.Name]; note != "" {
		fmt.Fprintf(w, "  client side:     %s\n", note)
	}
	fmt.Fprintf(w, "  kill points:     %s\n", strings.Join(allSteps(d), ", "))
	for _, f := range []string{d.redisFile, d.file} {
		if f == "" {
			continue
		}
		src, err := sqlFiles.ReadFile(f)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\n---- lab/%s ----\n%s", f, src)
	}
	if d.effect == "" {
		src, err := sqlFiles.ReadFile("lab.sql")
		if err != nil {
			return err
		}
		common, err := parseStatements(string(src))
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\n---- lab/lab.sql: the effect (one posting per call, no dedup of its own) ----\n%s\n", common["effect"])
	}
	return nil
}

// clientNotes say what a design gets wrong outside its SQL.
var clientNotes = map[string]string{
	"uuid_per_retry": "the client sends idem.execute(tenant, <a new UUID for every send>, ...); " +
		"a retry after a timeout is a new key, a new operation",
	"revision_as_duplicate": "the producer sends a settlement revision as idem.execute(tenant, <the settlement's operation_id>, <corrected payload>); " +
		"atomic sends it under a new operation id (<operation_id>-rev2), as quarantine accept-as-new would",
	"raw_json_compare": "the client hashes the body bytes it received: 'raw-sha256:' || sha256(body)",
	"redis_inbox": "the lab runs redis-server with its own data directory and socket, snapshots it (SAVE) after the crash " +
		"trials, and SIGKILLs and restarts it after the recovery retries",
	"projection_rebuild": "after the DLQ replays the lab runs the rebuild statement and judges the projection again",
}

// allSteps lists every step a design's first attempt can be killed at.
func allSteps(d design) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range []Trial{{}, {ClaimPath: true}} {
		for _, s := range d.steps(t) {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}
