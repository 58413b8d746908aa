package tui

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The console stays a house of small rooms: no non-test file over
// maxFileLines, no package over maxPackageLines of non-test Go. The test logs
// each package's size and its largest file.
func TestConsoleSizeLimits(t *testing.T) {
	const maxFileLines, maxPackageLines = 600, 2000
	perPackage := map[string]int{}
	largest := map[string]string{}
	fileLines := map[string]int{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n := bytes.Count(b, []byte("\n"))
		dir := filepath.Dir(path)
		perPackage[dir] += n
		fileLines[path] = n
		if n > fileLines[largest[dir]] {
			largest[dir] = path
		}
		if n > maxFileLines {
			t.Errorf("%s: %d lines, more than %d: split it by what it does", path, n, maxFileLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dirs := make([]string, 0, len(perPackage))
	for d := range perPackage {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		t.Logf("tui/%-14s %5d lines; largest %s (%d)", strings.TrimPrefix(d, "."), perPackage[d], largest[d], fileLines[largest[d]])
		if perPackage[d] > maxPackageLines {
			t.Errorf("package tui/%s: %d lines, more than %d: it is two rooms", d, perPackage[d], maxPackageLines)
		}
	}
}
