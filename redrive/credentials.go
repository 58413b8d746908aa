package redrive

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"

	"github.com/idemctl/idemctl/idem"
)

// A class's configuration is written by an operator, but its references are
// read by whoever runs resolve, from their own environment and disk: a
// reference may only name what that person set aside for re-drives.
const (
	// EnvPrefix is the prefix of every environment variable an env:
	// reference may name (env:IDEMCTL_REDRIVE_PAYMENTS_TOKEN), so that a
	// class cannot name PGPASSWORD or a cloud key.
	EnvPrefix = "IDEMCTL_REDRIVE_"
	// CredentialDirEnv names the directory file: references are read under,
	// when resolve's --credential-dir is not given. Without one, every file:
	// reference is refused.
	CredentialDirEnv = "IDEMCTL_CREDENTIAL_DIR"
	// maxCredential bounds what a file: reference reads.
	maxCredential = 16 << 10
)

// ErrReference: a header's reference names what the person running resolve
// did not set aside for re-drives, or cannot be read.
var ErrReference = errors.New("credential reference refused")

var (
	// envRefRE and fileRefRE are the forms the database accepts too
	// (idem.redrive_reference_problem): a prefixed variable, and a relative
	// path of plain names (no "..", no hidden file, no absolute path).
	envRefRE  = regexp.MustCompile(`^IDEMCTL_REDRIVE_[A-Z0-9_]+$`)
	fileRefRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*$`)
)

// Credentials is what the person running resolve lets a re-drive read.
type Credentials struct {
	// Dir is the directory file: references are read under ("" refuses
	// them all).
	Dir string
}

// CredentialsFromEnv is the credentials' default: Dir from
// IDEMCTL_CREDENTIAL_DIR.
func CredentialsFromEnv() Credentials { return Credentials{Dir: os.Getenv(CredentialDirEnv)} }

// isRef says whether a header value is a reference (and must be a valid one).
func isRef(v string) bool { return strings.HasPrefix(v, "env:") || strings.HasPrefix(v, "file:") }

// checkRef says what is wrong with a reference's form, or nil.
func checkRef(v string) error {
	switch {
	case strings.HasPrefix(v, "env:"):
		if !envRefRE.MatchString(v[4:]) {
			return fmt.Errorf("%s: only environment variables named %s... may be referenced", v, EnvPrefix)
		}
	case strings.HasPrefix(v, "file:"):
		if !fileRefRE.MatchString(v[5:]) {
			return fmt.Errorf("%s: a file reference is a path relative to the credential directory, of plain names (no '..', no hidden or absolute path)", v)
		}
	}
	return nil
}

// Resolve reads a header value: a reference (env:NAME, file:PATH) is read
// now, under the rules; any other value is itself. The error is one line that
// names the reference and says why it is refused.
func (c Credentials) Resolve(v string) (string, error) {
	if !isRef(v) {
		return v, nil
	}
	if err := checkRef(v); err != nil {
		return "", fmt.Errorf("%w: %w", ErrReference, err)
	}
	var val string
	if name, ok := strings.CutPrefix(v, "env:"); ok {
		env, set := os.LookupEnv(name)
		if !set {
			return "", fmt.Errorf("%w: %s: environment variable %s is not set", ErrReference, v, name)
		}
		val = env
	} else {
		read, err := c.readFile(v[5:])
		if err != nil {
			return "", fmt.Errorf("%w: %s: %w", ErrReference, v, err)
		}
		val = read
	}
	if idem.CheckText("credential", val, maxCredential) != nil {
		return "", fmt.Errorf("%w: %s: the value holds control characters or is too long for a header", ErrReference, v)
	}
	return val, nil
}

// readFile reads name under the credential directory: through an os.Root, so
// that neither ".." nor a symbolic link leads out of it; only a regular file
// that nobody but its owner may read or write.
func (c Credentials) readFile(name string) (string, error) {
	if c.Dir == "" {
		return "", fmt.Errorf("no credential directory is configured (--credential-dir or %s)", CredentialDirEnv)
	}
	root, err := os.OpenRoot(c.Dir)
	if err != nil {
		return "", fmt.Errorf("credential directory: %w", errors.Unwrap(err))
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("not readable under the credential directory %s: %w", c.Dir, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", errors.New("not a regular file")
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("its mode %04o lets others read or write it (chmod 600)", perm)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxCredential+1))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// resolveHeaders reads every configured header, references included, once:
// a sender refuses to exist (and so sends nothing) when one is refused.
func (c Config) resolveHeaders(creds Credentials) (map[string]string, error) {
	out := make(map[string]string, len(c.Headers))
	for name, v := range c.Headers {
		val, err := creds.Resolve(v)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", name, err)
		}
		out[name] = val
	}
	return out, nil
}
