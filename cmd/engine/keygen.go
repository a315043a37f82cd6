package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/nats-io/nkeys"
)

func runKeygen(_ context.Context, e *env, args []string) int {
	var out string
	fs := newFlags(e, "keygen", "[--out FILE]", `Generates an nkeys user key pair for a participant to sign its artifacts
with (docs/VERIFY.md). The seed ("SU…", the secret) goes to FILE, created
with mode 0600 (an existing file is never overwritten), or to standard
output without --out. The public key ("U…", what a charter's "keys" binds
to the participant's token) goes to standard error, alone on its line.

engine publish --key FILE signs with the seed.`)
	fs.StringVar(&out, "out", "", "the file to write the seed to (mode 0600, must not exist)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(e.stderr, "engine keygen: takes no arguments")
		return exitUsage
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		fmt.Fprintf(e.stderr, "engine keygen: %v\n", err)
		return exitUsage
	}
	seed, err := kp.Seed()
	if err != nil {
		fmt.Fprintf(e.stderr, "engine keygen: %v\n", err)
		return exitUsage
	}
	pub, err := kp.PublicKey()
	if err != nil {
		fmt.Fprintf(e.stderr, "engine keygen: %v\n", err)
		return exitUsage
	}
	line := append(seed, '\n')
	if out == "" {
		if _, err := e.stdout.Write(line); err != nil {
			fmt.Fprintf(e.stderr, "engine keygen: %v\n", err)
			return exitUsage
		}
	} else if err := writeNewSecret(out, line); err != nil {
		fmt.Fprintf(e.stderr, "engine keygen: --out %s: %v\n", out, err)
		return exitUsage
	}
	fmt.Fprintln(e.stderr, pub)
	return exitOK
}

// writeNewSecret writes data to path, a file it creates with mode 0600;
// a path that exists (a file, a link, anything) is refused, untouched.
func writeNewSecret(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return errors.New("the file exists; keygen never overwrites a key")
	}
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}
