package policy

import (
	"errors"
	"fmt"
)

// Sentinels; compare with errors.Is.
var (
	// ErrUnknownProfile: the name is neither a built-in profile nor a file.
	ErrUnknownProfile = errors.New("unknown profile")
	// ErrInvalid: the profile decodes but breaks a rule.
	ErrInvalid = errors.New("invalid policy")
	// ErrSyntax: the profile is not valid YAML for the schema.
	ErrSyntax = errors.New("cannot decode policy")
)

// FieldError is one problem with one field. Origin says where the value was
// written ("profiles/tier1.yaml:12:5" or "--write").
type FieldError struct {
	Origin string
	Field  string
	Msg    string
}

func (e *FieldError) Error() string {
	if e.Origin == "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", e.Origin, e.Field, e.Msg)
}

// Is makes every FieldError match ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }
