// Command watch measures how long the engine takes to notice an unsafe edit
// of its stream: an administrator sets max_age on the live PARLEY stream,
// and the time is taken from the moment the update's API call returns to
// the first GET /healthz that answers 503 (polled every millisecond, as a
// client of the engine sees it). Two ways, alternately, in one run:
//
//   - advisories: the engine as it runs by default, subscribed to the
//     stream's advisories and the API audit;
//   - check only: an engine user that may not subscribe to advisories
//     (an older deploy/nats.conf), so that only the periodic check
//     (-every) notices.
//
// Beside them, the update's own round trip (UpdateStream, as the
// administrator's client sees it), as the reference in the same run. Each
// run is a fresh server, stream and engine (the engine joins the server
// with --nats, as on a cluster); a few messages are in the stream.
//
//	go run ./bench/watch -runs 9
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/embedded"
	"github.com/parley-engine/parley/health"
	"github.com/parley-engine/parley/internal/benchkit"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/service"
)

const conf = `
accounts { A { jetstream: enabled, users: [
  {user: admin, password: admin}
  {user: engine, password: engine}
  {user: blind, password: blind, permissions: {subscribe: {deny: ["$JS.EVENT.>"]}}}
] } }
`

func main() {
	runs := flag.Int("runs", 9, "runs of each way")
	every := flag.Duration("every", health.DefaultStreamCheckEvery, "the engine's stream check interval")
	flag.Parse()
	dir := benchkit.TempDir("parley-watch-")
	defer os.RemoveAll(dir)
	cf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o600); err != nil {
		log.Fatal(err)
	}
	var adv, chk, upd []time.Duration
	for i := range *runs {
		for _, user := range []string{"engine", "blind"} {
			n, u, err := once(filepath.Join(dir, fmt.Sprint(i, user)), cf, user, *every)
			if err != nil {
				log.Fatal(err)
			}
			if user == "engine" {
				adv, upd = append(adv, n), append(upd, u)
			} else {
				chk = append(chk, n)
			}
		}
	}
	for _, d := range [][]time.Duration{adv, chk, upd} {
		slices.Sort(d) // for the min and max
	}
	med := benchkit.Median[time.Duration]
	fmt.Printf("runs %d, check every %s\n", *runs, *every)
	fmt.Printf("update round trip   median %8.2f ms  (min %.2f, max %.2f)\n", ms(med(upd)), ms(upd[0]), ms(upd[len(upd)-1]))
	fmt.Printf("noticed, advisories median %8.2f ms  (min %.2f, max %.2f)  = %.1f x the update's round trip\n",
		ms(med(adv)), ms(adv[0]), ms(adv[len(adv)-1]), float64(med(adv))/float64(med(upd)))
	fmt.Printf("noticed, check only median %8.2f ms  (min %.2f, max %.2f)  = %.2f of the check interval\n",
		ms(med(chk)), ms(chk[0]), ms(chk[len(chk)-1]), float64(med(chk))/float64(*every))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// once runs one server and engine, edits the stream and returns how long
// the engine took to say so, and the update's round trip.
func once(dir, cf, user string, every time.Duration) (noticed, update time.Duration, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := embedded.Start(embedded.Config{Dir: filepath.Join(dir, "nats"), ConfigFile: cf, Host: "127.0.0.1", Port: -1})
	if err != nil {
		return 0, 0, err
	}
	defer embedded.Stop(srv)
	s, err := service.Start(ctx, service.Config{DataDir: filepath.Join(dir, "engine"), NATS: srv.ClientURL(), User: user, Password: user,
		HTTP: "127.0.0.1:0", StreamCheckEvery: every})
	if err != nil {
		return 0, 0, err
	}
	defer s.Close()
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("admin", "admin"))
	if err != nil {
		return 0, 0, err
	}
	defer nc.Close()
	c, _ := client.New(nc, "alice")
	for range 10 {
		if _, err := c.Open(ctx, client.Charter{Title: "t"}); err != nil {
			return 0, 0, err
		}
	}
	url := "http://" + s.HTTPAddr() + "/healthz"
	status := func() int {
		resp, err := http.Get(url)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for status() != http.StatusOK {
		time.Sleep(time.Millisecond)
	}
	// Land the edit at a random point of the check's period.
	time.Sleep(time.Duration(time.Now().UnixNano() % int64(every)))
	js, _ := jetstream.New(nc)
	cfg := ledger.StreamConfig(1)
	cfg.MaxAge = 3 * time.Minute
	t0 := time.Now()
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return 0, 0, err
	}
	t1 := time.Now()
	for status() != http.StatusServiceUnavailable {
		if ctx.Err() != nil {
			return 0, 0, fmt.Errorf("the engine (%s) never noticed", user)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(t1), t1.Sub(t0), nil
}
