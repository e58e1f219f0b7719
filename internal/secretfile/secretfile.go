// Package secretfile reads credentials from files, the one place leasegate
// takes them from (never flags, a configuration's own text, or logs): a
// file must be private to its owner and group, and its errors name the
// file, never its content.
package secretfile

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// CheckPrivate refuses a credential file that others (not its owner nor
// its group) may read or write, as libpq refuses such a .pgpass: 0600, or
// 0640 with the service's group (root:leasegate), are the modes to use.
// what names the file in errors ("password file").
func CheckPrivate(what, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if m := st.Mode().Perm(); m&0o007 != 0 {
		return fmt.Errorf("%s %s has mode %04o: others may read it; chmod o-rwx (0600, or 0640 for the service's group)", what, path, m)
	}
	return nil
}

// Read returns the content of the private file at path.
func Read(what, path string) ([]byte, error) {
	if path == "" {
		return nil, errors.New("no " + what)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := CheckPrivate(what, path); err != nil {
		return nil, err
	}
	return b, nil
}

// Line returns the one line of the private file at path (a trailing
// newline is not part of it).
func Line(what, path string) (string, error) {
	b, err := Read(what, path)
	if err != nil {
		return "", err
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" || strings.ContainsAny(s, "\r\n") {
		return "", fmt.Errorf("%s %s must hold one non-empty line", what, path)
	}
	return s, nil
}
