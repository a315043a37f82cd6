package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"time"
)

// The attacker runs in a process of its own: this program started again
// with attackerEnv set, its job on standard input and its result on
// standard output. Its goroutines (a slow-body attack's are one a socket)
// then share no Go scheduler with the honest relays, whose latency is the
// engine's and the machine's, not the soak's own.
const attackerEnv = "PARLEY_SOAK_ATTACKER"

type attackJob struct {
	Class             string
	NATS, HTTP, Token string
	User, Password    string // the participant's, for an insider
	Sizes             sizes
	Insider           bool
	State             json.RawMessage // the attack as its setup left it
	Duration          time.Duration
}

type attackResult struct {
	Sent  int64
	Note  string
	State json.RawMessage // the attack as its run left it (for check)
	Error string
}

func byName(name string) attack {
	for _, a := range attacks {
		if a.name() == name {
			return a
		}
	}
	return nil
}

// runAttacker is the attacker process.
func runAttacker() {
	var job attackJob
	var res attackResult
	defer func() { json.NewEncoder(os.Stdout).Encode(res) }()
	if err := json.NewDecoder(os.Stdin).Decode(&job); err != nil {
		res.Error = "the job: " + err.Error()
		return
	}
	a := byName(job.Class)
	if a == nil {
		res.Error = "no class " + job.Class
		return
	}
	if err := json.Unmarshal(job.State, a); err != nil {
		res.Error = "the attack's state: " + err.Error()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), job.Duration)
	defer cancel()
	var sent atomic.Int64
	note, err := a.run(ctx, &engine{natsURL: job.NATS, httpAddr: job.HTTP, token: job.Token, insider: job.Insider, user: job.User, password: job.Password}, job.Sizes, &sent)
	res.Sent, res.Note = sent.Load(), note
	if err != nil {
		res.Error = err.Error()
	}
	res.State, _ = json.Marshal(a)
}

// runAttack runs a against e for d in an attacker process and returns
// what it sent and said; a's state is then the run's.
func runAttack(ctx context.Context, a attack, e *engine, sz sizes, d time.Duration) (int64, string, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, "", err
	}
	state, err := json.Marshal(a)
	if err != nil {
		return 0, "", err
	}
	job, _ := json.Marshal(attackJob{Class: a.name(), NATS: e.natsURL, HTTP: e.httpAddr, Token: e.token, Insider: e.insider, User: e.user, Password: e.password, Sizes: sz, State: state, Duration: d})
	cctx, cancel := context.WithTimeout(ctx, d+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, self)
	cmd.Env = append(os.Environ(), attackerEnv+"=1")
	cmd.Stdin = bytes.NewReader(job)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return 0, "", fmt.Errorf("the attacker process: %w (%s)", err, out.Bytes())
	}
	var res attackResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return 0, "", fmt.Errorf("the attacker process's result: %w (%s)", err, out.Bytes())
	}
	if res.Error != "" {
		return res.Sent, res.Note, fmt.Errorf("the attacker: %s", res.Error)
	}
	if err := json.Unmarshal(res.State, a); err != nil {
		return 0, "", err
	}
	return res.Sent, res.Note, nil
}
