package idem

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Identity limits, in bytes. The database enforces the same ones
// (idem.identity_problem).
const (
	MaxTenantIDBytes    = 128
	MaxOperationIDBytes = 256
)

// ErrInvalidIdentity is wrapped by every identity validation error.
var ErrInvalidIdentity = errors.New("invalid identity")

// Identity is the business identity of an operation. The tenant is part of it:
// the same operation id in two tenants is two operations.
type Identity struct {
	TenantID    string
	OperationID string
}

// IdentityError says which field of an identity is wrong and why.
type IdentityError struct {
	Field   string // "tenant_id" or "operation_id"
	Problem string
}

func (e *IdentityError) Error() string {
	return fmt.Sprintf("invalid identity: %s %s", e.Field, e.Problem)
}

// Unwrap makes errors.Is(err, ErrInvalidIdentity) true.
func (e *IdentityError) Unwrap() error { return ErrInvalidIdentity }

// Validate checks the identity rules: both parts present, valid UTF-8, no
// control characters (Unicode Cc), at most 128 and 256 bytes.
func (id Identity) Validate() error {
	if err := checkPart("tenant_id", id.TenantID, MaxTenantIDBytes); err != nil {
		return err
	}
	return checkPart("operation_id", id.OperationID, MaxOperationIDBytes)
}

func checkPart(field, v string, max int) error {
	switch {
	case v == "":
		return &IdentityError{field, "is required"}
	case len(v) > max:
		return &IdentityError{field, fmt.Sprintf("is longer than %d bytes (%d)", max, len(v))}
	}
	// Most identities are printable ASCII: one pass over the bytes then says
	// all that the checks below would (valid UTF-8, no control character).
	ascii := true
	for i := 0; i < len(v) && ascii; i++ {
		ascii = v[i] >= 0x20 && v[i] < 0x7f
	}
	if ascii {
		return nil
	}
	if !utf8.ValidString(v) {
		return &IdentityError{field, "is not valid UTF-8"}
	}
	for i, r := range v {
		if unicode.Is(unicode.Cc, r) {
			return &IdentityError{field, fmt.Sprintf("contains a control character (U+%04X at byte %d)", r, i)}
		}
	}
	return nil
}

// String renders the identity for messages: tenant/operation, quoted when needed.
func (id Identity) String() string {
	return fmt.Sprintf("%q/%q", id.TenantID, id.OperationID)
}
