// Command critic is an exec participant of the relay examples: it reads a
// turn as JSON on standard input and answers, on standard output, with an
// OBJECTION to the last artifact it was shown, blocking every third round.
// Any language can play this part; this one needs only Go.
package main

import (
	"encoding/json"
	"fmt"
	"os"
)

type turn struct {
	Round   int `json:"round"`
	Context []struct {
		Artifact struct {
			ID   string `json:"artifact_id"`
			Type string `json:"artifact_type"`
		} `json:"artifact"`
	} `json:"context"`
}

func main() {
	var t turn
	if err := json.NewDecoder(os.Stdin).Decode(&t); err != nil {
		fmt.Fprintln(os.Stderr, "critic: the turn is not JSON:", err)
		os.Exit(1)
	}
	if len(t.Context) == 0 {
		fmt.Fprintln(os.Stderr, "critic: nothing to criticize")
		os.Exit(1)
	}
	last := t.Context[len(t.Context)-1].Artifact
	blocking := t.Round%3 == 0
	draft := map[string]any{
		"artifact_type": "OBJECTION",
		"payload": map[string]any{
			"statement": fmt.Sprintf("Round %d: the %s does not show its effect on the tail latency of the mixed workload.", t.Round, last.Type),
			"blocking":  blocking,
		},
		"references": []map[string]string{{"artifact_id": last.ID, "relation": "objects-to"}},
	}
	json.NewEncoder(os.Stdout).Encode(draft)
}
