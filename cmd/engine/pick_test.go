package main

import (
	"io"
	"testing"

	"github.com/parley-engine/parley/binding"
)

// chunks is a terminal that delivers its keys in the reads given.
type chunks []string

func (c *chunks) Read(p []byte) (int, error) {
	if len(*c) == 0 {
		return 0, io.EOF
	}
	n := copy(p, (*c)[0])
	(*c)[0] = (*c)[0][n:]
	if (*c)[0] == "" {
		*c = (*c)[1:]
	}
	return n, nil
}

// Keys that reach the picker together, in one read of the terminal (typed
// fast, pasted, sent by a script), are each a key: none is lost.
func TestPick_KeysInOneRead(t *testing.T) {
	env := &binding.Envelope{Question: binding.Question{Stem: "which?", RecommendedIdx: 0,
		Options: []binding.Option{{Label: "one"}, {Label: "two"}, {Label: "three"}},
		Hatches: binding.Hatches{FreeText: true, Dialogue: true}}}
	for _, tc := range []struct {
		name  string
		reads chunks
		want  map[string]any
	}{
		{"down down enter", chunks{"\x1b[B\x1b[B\r"}, map[string]any{"resolution": "option", "option_idx": 2}},
		{"down up down enter, split", chunks{"\x1b[B\x1b", "[A\x1b[B", "\r"}, map[string]any{"resolution": "option", "option_idx": 1}},
		{"j k j j enter", chunks{"jkjj\n"}, map[string]any{"resolution": "option", "option_idx": 2}},
		{"an answer typed with its key", chunks{"amine\r"}, map[string]any{"resolution": "answer", "answer": "mine"}},
		{"q then d: the first wins", chunks{"qd"}, map[string]any{"resolution": "question"}},
		{"3 chooses the third option, as numbered", chunks{"3"}, map[string]any{"resolution": "option", "option_idx": 2}},
		{"a number past the options is no key", chunks{"7j\r"}, map[string]any{"resolution": "option", "option_idx": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, left := pick(&tc.reads, io.Discard, env, "judge")
			if left || len(got) != len(tc.want) {
				t.Fatalf("got %v (left %v), want %v", got, left, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}
