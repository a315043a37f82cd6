// Command engine is parley's command line: the engine service (serve),
// canonical JSON and artifact ids (id, canon, verify, jcs) and the version
// of the formats it speaks.
//
// Run "engine help" for the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
