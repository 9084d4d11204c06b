package seccomp

import (
	"errors"
	"fmt"

	"github.com/agentjail/agentjail/policy"
)

// Filters are the filters a policy asks for, in order: the built-in one
// (unless seccomp.default is false), then one per seccomp.files entry. Each
// file is its own filter, so it can only add refusals to the built-in
// one, never lift them. read reads a file (os.ReadFile, or a reader that
// refuses what is not a file and caps the size).
func Filters(p policy.Policy, read func(string) ([]byte, error), h Host) ([]Filter, error) {
	var out []Filter
	if p.Seccomp.Default == nil || *p.Seccomp.Default {
		out = append(out, Builtin(p.InnerSandbox == policy.InnerSealed))
	}
	var errs []error
	for i, name := range p.Seccomp.Files {
		field := fmt.Sprintf("seccomp.files[%d]", i)
		data, err := read(name)
		if err != nil {
			errs = append(errs, policy.ErrorAt(p, field, fmt.Sprintf("cannot read seccomp profile %s: %v", policy.Quote(name), err)))
			continue
		}
		f, err := Import(policy.Quote(name), data, h)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, f)
	}
	return out, errors.Join(errs...)
}
