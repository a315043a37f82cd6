package lease_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/lease"
)

func ExampleLeases() {
	dir, _ := os.MkdirTemp("", "lease-example-")
	defer os.RemoveAll(dir)
	s, err := embedded.Start(embedded.Config{Dir: dir, DontListen: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer embedded.Stop(s)
	nc, _ := nats.Connect("", nats.InProcessServer(s))
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()

	kv, _ := lease.Bucket(ctx, js, lease.Config{})
	a, _ := lease.New(ctx, kv, "engine-1")
	b, _ := lease.New(ctx, kv, "engine-2")

	la, _ := a.Acquire(ctx, 17)
	_, err = b.Acquire(ctx, 17)
	fmt.Println(errors.Is(err, lease.ErrHeld), err.(*lease.Error).Holder)

	stale := *la
	fmt.Println(a.Renew(ctx, la))                               // the owner renews: a new revision
	fmt.Println(errors.Is(a.Renew(ctx, &stale), lease.ErrLost)) // a past revision is fenced off
	fmt.Println(a.Release(ctx, la))
	lb, _ := b.Acquire(ctx, 17)
	fmt.Println(lb.Owner, lb.Revision > la.Revision)
	// Output:
	// true engine-1
	// <nil>
	// true
	// <nil>
	// engine-2 true
}
