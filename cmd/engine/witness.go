package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/parley-engine/parley/tlog"
	"github.com/parley-engine/parley/witness"
)

const witnessAbout = `Witnesses an engine's checkpoints, so that whoever holds the engine's key
cannot show two histories of a deliberation: it reads the stream from its
first message, as a participant does (an ordered push consumer), rebuilds
each deliberation's log as the engine does, and cosigns (C2SP
tlog-cosignature, with its own key) every checkpoint that opens under an
accepted engine key (--engine-key, repeatable: the engine's public key or a
file holding it) and whose root is the log's at its size, extending the
last one it cosigned of that deliberation. It keeps each cosigned note in
DIR/<deliberation>/<size>.note and answers requests {"id":"<deliberation>"}
on parley.witness.<name>.checkpoint with the latest (NATS micro error 404
when it has none).

A checkpoint it refuses is said on standard error, and never cosigned. One
signed by an accepted engine key for a log the stream does not hold (a
second history) is said loudly, kept as DIR/<deliberation>/refused-<size>.note,
and the witness goes on. It prints its cosignature verifier key on standard
output, what an auditor gives engine audit --witness. It runs until
interrupted (exit 0); exit 2: bad arguments, or the stream cannot be read.

Its NATS user reads the stream as a participant does, subscribes to
parley.witness.<name>.checkpoint and answers requests (allow_responses):
docs/OPERATIONS.md has the user block.`

func runWitness(ctx context.Context, e *env, args []string) int {
	// It reads the stream: a client without credentials may not (it asks
	// the query service only), so it reads as the participant user of a
	// local engine's credentials when it finds them.
	nf := natsFlags{participant: true}
	var engineKeys roots
	fs := newFlags(e, "witness", "--key FILE --engine-key KEY [--engine-key KEY]... [--name NAME] [--dir DIR] [--nats URL]", witnessAbout)
	keyFile := fs.String("key", "", "the witness's nkeys seed file (engine keygen --out FILE); required")
	name := fs.String("name", witness.DefaultName, "the witness's name: its cosignatures' key name and its request subject's token")
	dir := fs.String("dir", "parley-witness", "where the cosigned notes are kept")
	fs.Var(&engineKeys, "engine-key", "an engine's public key, or a file holding it, whose checkpoints to accept (repeatable; at least one)")
	nf.register(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(e.stderr, "engine witness: "+format+"\n", a...)
		return exitUsage
	}
	if fs.NArg() != 0 {
		return fail("no arguments, only flags (engine witness -h)")
	}
	if *keyFile == "" {
		return fail("--key FILE is required: the witness's own key (engine keygen --out FILE makes one)")
	}
	seed, err := os.ReadFile(*keyFile)
	if err != nil {
		return fail("--key: %v", err)
	}
	if len(engineKeys) == 0 {
		return fail("--engine-key is required: the engine's public key (credentials.json's engine_key, GET /api/v1/engine), or a file holding it")
	}
	var keys []string
	for _, k := range engineKeys {
		key, err := publicKeyArg(k)
		if err != nil {
			return fail("--engine-key %s: %v", k, err)
		}
		keys = append(keys, key)
	}
	report := func(v witness.Verdict) {
		switch {
		case v.Cosigned != nil:
			fmt.Fprintf(e.stderr, "cosigned %s at %d messages\n", v.Deliberation, v.Size)
		case v.SecondHistory() && v.Kept != "":
			fmt.Fprintf(e.stderr, "SECOND HISTORY: deliberation %s: %v (stream position %d; the engine's note is kept in %s)\n", v.Deliberation, v.Refused, v.Position, v.Kept)
		case v.SecondHistory():
			fmt.Fprintf(e.stderr, "SECOND HISTORY: deliberation %s: %v (stream position %d)\n", v.Deliberation, v.Refused, v.Position)
		default:
			fmt.Fprintf(e.stderr, "refused a checkpoint of %s (stream position %d): %v\n", v.Deliberation, v.Position, v.Refused)
		}
	}
	w, err := witness.New(witness.Config{Name: *name, Seed: bytes.TrimSpace(seed), EngineKeys: keys, Dir: *dir, Report: report})
	if err != nil {
		return fail("%v", strings.TrimPrefix(err.Error(), "witness: "))
	}
	nc, _, err := nf.connect(nats.MaxReconnects(-1), nats.ReconnectWait(time.Second))
	if err != nil {
		return fail("%v", err)
	}
	defer nc.Close()
	sub, err := w.Serve(nc)
	if err != nil {
		return fail("serve %s: %v", witness.Subject(*name), err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		return fail("%v", err)
	}
	// A subscription the server refuses is said on the connection, before
	// the answer to the flush (the error handler runs later).
	if err := nc.LastError(); err != nil && strings.Contains(err.Error(), witness.Subject(*name)) {
		fmt.Fprintf(e.stderr, "engine witness: the NATS user may not subscribe to %s: the witness cosigns into %s and answers no request (give it a user that may: docs/OPERATIONS.md)\n", witness.Subject(*name), *dir)
	}
	fmt.Fprintln(e.stdout, w.VerifierKey())
	fmt.Fprintf(e.stderr, "witness %s: following the stream at %s, accepting %d engine key(s); cosigned notes in %s; requests on %s\n",
		*name, nf.url, len(keys), *dir, witness.Subject(*name))
	if err := w.Follow(ctx, nc); err != nil {
		return fail("read the stream at %s: %v%s", nf.url, err, connectHint(err))
	}
	return exitOK
}

// publicKeyArg reads an Ed25519 nkeys public key given as itself or as a
// file holding it.
func publicKeyArg(k string) (string, error) {
	if _, err := tlog.PublicKey(k); err == nil {
		return k, nil
	}
	b, err := os.ReadFile(k)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", errors.New("neither an nkeys public key (U…, N…) nor a file")
		}
		return "", err
	}
	key := strings.TrimSpace(string(b))
	if _, err := tlog.PublicKey(key); err != nil {
		return "", errors.New("the file holds no nkeys public key (U…, N…)")
	}
	return key, nil
}
