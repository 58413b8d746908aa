package cmdutil

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// NO_COLOR, TERM=dumb or a pipe turn colour off (doctor's colours: TestDoctorColour).
func TestColorWanted(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	assert.True(t, colorWanted(true, env(nil)))
	assert.False(t, colorWanted(true, env(map[string]string{"NO_COLOR": "1"})))
	assert.False(t, colorWanted(true, env(map[string]string{"TERM": "dumb"})))
	assert.False(t, colorWanted(false, env(nil)))
}
