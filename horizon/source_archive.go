package horizon

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// archiveRecord is one archived message: the identity it carries, when, and
// the payload when the archive keeps it.
type archiveRecord struct {
	Tenant      string          `json:"tenant"`
	OperationID string          `json:"operation_id"`
	TS          *time.Time      `json:"ts"`
	Payload     json.RawMessage `json:"payload"`
}

// archiveExts are the files an archive source reads; others are ignored.
var archiveExts = []string{".ndjson", ".ndjson.gz", ".jsonl", ".jsonl.gz"}

// probeArchive reads every NDJSON (optionally gzipped) file under the
// directory, one line at a time, and pins every identity it holds. A line is
// {"tenant", "operation_id", "ts"}, with the operation's "payload" when the
// archive keeps it (intake reads it; the proof needs only the identity). A line that
// is not an archived message fails the proof, naming the file and line.
func probeArchive(ctx context.Context, s Source, env *probeEnv) (observation, error) {
	dir := s.Config.Dir
	st, err := os.Stat(dir)
	if err != nil {
		return observation{}, fmt.Errorf("archive directory: %w", err)
	}
	if !st.IsDir() {
		return observation{}, fmt.Errorf("archive %s is not a directory", dir)
	}
	var files []string
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			for _, ext := range archiveExts {
				if strings.HasSuffix(d.Name(), ext) {
					files = append(files, path)
					break
				}
			}
		}
		return nil
	})
	if err != nil {
		return observation{}, fmt.Errorf("list archive %s: %w", dir, err)
	}
	sort.Strings(files)
	obs := observation{mode: Enumerating}
	for _, f := range files {
		if err := readArchiveFile(ctx, f, env, &obs); err != nil {
			return observation{}, err
		}
	}
	obs.detail = map[string]any{"files": len(files)}
	return obs, nil
}

func readArchiveFile(ctx context.Context, path string, env *probeEnv, obs *observation) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return fmt.Errorf("archive %s: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var rec archiveRecord
		if err := json.Unmarshal([]byte(text), &rec); err != nil && env.lenient {
			if err := env.pin(ctx, Message{At: fmt.Sprintf("%s:%d", path, line), Problem: "not a JSON object: " + err.Error()}); err != nil {
				return err
			}
			continue
		} else if err != nil {
			return fmt.Errorf("nonsense in archive %s:%d: %v", path, line, err)
		}
		m := Message{Tenant: rec.Tenant, OperationID: rec.OperationID, TS: rec.TS, At: fmt.Sprintf("%s:%d", path, line)}
		if len(rec.Payload) > 0 && string(rec.Payload) != "null" {
			m.Payload = rec.Payload
		}
		if err := env.pin(ctx, m); err != nil {
			return fmt.Errorf("archive %s:%d: %w", path, line, err)
		}
		obs.enumerated++
		if rec.TS != nil && (obs.oldest == nil || rec.TS.Before(*obs.oldest)) {
			t := *rec.TS
			obs.oldest = &t
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("archive %s:%d: %w", path, line, err)
	}
	return nil
}
