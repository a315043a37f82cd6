package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/term"
)

// isTerminal reports whether w is a terminal. A secret is printed only
// there: standard output that is a file, a pipe or a service manager's
// journal is a log, and a secret in a log is readable by whoever reads the
// log.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// writeSecretFile writes data to path readable by its owner only: a fresh
// file in the same directory (created with mode 0750 if missing), renamed
// over path, so that the secret is never in a file of wider mode.
func writeSecretFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*") // mode 0600
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
