package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/wire"
)

func runReceipt(ctx context.Context, e *env, args []string) int {
	var nf natsFlags
	var out string
	var wait time.Duration
	fs := newFlags(e, "receipt", "[--nats URL] [--out DIR] [--wait D] DELIBERATION ORDINAL...", `Asks the engine for the receipts of messages of a deliberation by their
ordinals (#N): each a C2SP tlog-proof that the message is in the
deliberation's log, under the first checkpoint signed by the engine that
covers it (docs/VERIFY.md). A receipt proves, to anyone who trusts the
engine's public key, that the message was in the record: engine audit
--trusted-key KEY --receipt FILE fails a recording that omits it.

With --out, each receipt is written to DIR/<ordinal>.tlog-proof (the
directory is created); otherwise the receipts are printed as JSON
({"deliberation","receipts":[{"ordinal","receipt"}|{"ordinal","code",
"message"}]}). A message no checkpoint covers yet (receipt.not_covered) is
asked for again until --wait runs out: the engine checkpoints after each
judgment and at the end. Exit status: 0 every receipt given, 1 some
missing, 2 usage.`)
	nf.register(fs)
	fs.StringVar(&out, "out", "", "a directory to write each receipt to, as <ordinal>.tlog-proof")
	fs.DurationVar(&wait, "wait", 0, "how long to wait for messages no checkpoint covers yet (0: do not wait)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() < 2 || !wire.ValidDeliberation(fs.Arg(0)) {
		fmt.Fprintln(e.stderr, "engine receipt: need a deliberation id and at least one ordinal (engine receipt -h)")
		return exitUsage
	}
	id := fs.Arg(0)
	var ords []uint64
	for _, a := range fs.Args()[1:] {
		n, err := strconv.ParseUint(a, 10, 64)
		if err != nil || n == 0 {
			fmt.Fprintf(e.stderr, "engine receipt: %q is not an ordinal (1 for the open, as #N counts)\n", a)
			return exitUsage
		}
		ords = append(ords, n)
	}
	if len(ords) > api.MaxReceipts {
		fmt.Fprintf(e.stderr, "engine receipt: at most %d ordinals at once\n", api.MaxReceipts)
		return exitUsage
	}
	nc, _, err := nf.connect()
	if err != nil {
		fmt.Fprintf(e.stderr, "engine receipt: %v\n", err)
		return exitUsage
	}
	defer nc.Close()
	cl, err := client.New(nc, cliToken)
	if err != nil {
		fmt.Fprintf(e.stderr, "engine receipt: %v\n", err)
		return exitUsage
	}
	list, err := waitReceipts(ctx, cl, id, ords, wait)
	if err != nil {
		fmt.Fprintf(e.stderr, "engine receipt: %v\n", err)
		return exitRejected
	}
	missing := 0
	for _, it := range list.Receipts {
		if it.Receipt == "" {
			missing++
		}
	}
	if out == "" {
		b, _ := json.Marshal(list)
		fmt.Fprintf(e.stdout, "%s\n", b)
	} else {
		if err := os.MkdirAll(out, 0o750); err != nil {
			fmt.Fprintf(e.stderr, "engine receipt: --out: %v\n", err)
			return exitUsage
		}
		for _, it := range list.Receipts {
			if it.Receipt == "" {
				fmt.Fprintf(e.stderr, "engine receipt: #%d: %s: %s\n", it.Ordinal, it.Code, it.Message)
				continue
			}
			name := filepath.Join(out, strconv.FormatUint(it.Ordinal, 10)+".tlog-proof")
			if err := os.WriteFile(name, []byte(it.Receipt), 0o640); err != nil {
				fmt.Fprintf(e.stderr, "engine receipt: %v\n", err)
				return exitUsage
			}
			fmt.Fprintln(e.stdout, name)
		}
	}
	if missing > 0 {
		return exitRejected
	}
	return exitOK
}

// waitReceipts asks for the receipts of the ordinals, and again, every
// half second for up to wait, while a checkpoint covers some of them not
// yet (the engine checkpoints after each judgment and at the end).
func waitReceipts(ctx context.Context, cl *client.Client, id string, ords []uint64, wait time.Duration) (api.ReceiptList, error) {
	deadline := time.Now().Add(wait)
	for {
		list, err := cl.Receipts(ctx, id, ords...)
		if err != nil {
			return list, err
		}
		pending := false
		for _, it := range list.Receipts {
			pending = pending || it.Code == api.CodeReceiptNotCovered
		}
		if !pending || time.Now().After(deadline) || ctx.Err() != nil {
			return list, nil
		}
		time.Sleep(500 * time.Millisecond)
	}
}
