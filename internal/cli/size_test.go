package cli

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The size limits of the command line and the console: a non-test file past
// maxFileLines is usually two rooms, and a package past maxPackageLines is
// usually two families. `make sizes` prints the largest of both.
const (
	maxFileLines    = 600
	maxPackageLines = 2000
)

// sizeRoots are the trees the limits hold for, from the module root.
var sizeRoots = []string{"internal/cli", "tui"}

// sourceSize is the line count of one non-test Go file or package (folder).
type sourceSize struct {
	path  string
	lines int
}

// sourceSizes counts the lines of every non-test .go file under roots, by
// file and by folder.
func sourceSizes(t *testing.T, moduleRoot string, roots []string) (files, packages []sourceSize) {
	t.Helper()
	byPackage := map[string]int{}
	for _, root := range roots {
		err := filepath.WalkDir(filepath.Join(moduleRoot, root), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(moduleRoot, path)
			n := bytes.Count(b, []byte("\n"))
			files = append(files, sourceSize{rel, n})
			byPackage[filepath.Dir(rel)] += n
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for p, n := range byPackage {
		packages = append(packages, sourceSize{p, n})
	}
	for _, s := range [][]sourceSize{files, packages} {
		sort.Slice(s, func(i, j int) bool {
			return s[i].lines > s[j].lines || s[i].lines == s[j].lines && s[i].path < s[j].path
		})
	}
	return files, packages
}

// largest renders the first n sizes, one per line.
func largest(sizes []sourceSize, n int) string {
	var b strings.Builder
	for _, s := range sizes[:min(n, len(sizes))] {
		fmt.Fprintf(&b, "  %5d  %s\n", s.lines, s.path)
	}
	return b.String()
}

// No non-test file under internal/cli or tui passes maxFileLines, and no
// package maxPackageLines; the test names each one that does and prints the
// largest (go test ./internal/cli -run TestSourceSizes -v, or make sizes).
func TestSourceSizes(t *testing.T) {
	t.Parallel()
	files, packages := sourceSizes(t, filepath.Join("..", ".."), sizeRoots)
	if len(files) == 0 {
		t.Fatal("no Go files found under", sizeRoots)
	}
	t.Logf("largest files (non-test lines):\n%s", largest(files, 10))
	t.Logf("largest packages (non-test lines):\n%s", largest(packages, 10))
	for _, f := range files {
		if f.lines > maxFileLines {
			t.Errorf("%s: %d lines, more than %d: split it along what it does", f.path, f.lines, maxFileLines)
		}
	}
	for _, p := range packages {
		if p.lines > maxPackageLines {
			t.Errorf("package %s: %d lines, more than %d: split it into packages", p.path, p.lines, maxPackageLines)
		}
	}
}
