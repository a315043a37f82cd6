package bindwrite

import (
	"strconv"
	"testing"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/binding"
)

// A decider's label is its token only when the charter names it, and only
// for the first MaxDeciderLabels tokens; a resolution's, one of the four
// kinds.
func TestDeciderLabels(t *testing.T) {
	var l deciderLabels
	ch := &api.Charter{Participants: []string{"judge"}, Terminators: []string{"moderator"}, Principal: "ceo"}
	for _, tc := range []struct {
		ch      *api.Charter
		decider string
		want    string
	}{
		{ch, "judge", "judge"},
		{ch, "moderator", "moderator"},
		{ch, "ceo", "ceo"},
		{ch, "mallory", otherLabel},
		{&api.Charter{}, "judge", otherLabel},
		{nil, "judge", otherLabel},
	} {
		if got := l.label(tc.ch, tc.decider); got != tc.want {
			t.Errorf("%v %s: %s, want %s", tc.ch, tc.decider, got, tc.want)
		}
	}
	many := &api.Charter{}
	for i := range MaxDeciderLabels + 10 {
		many.Participants = append(many.Participants, "d"+strconv.Itoa(i))
	}
	distinct := map[string]bool{}
	for _, d := range many.Participants {
		distinct[l.label(many, d)] = true
	}
	// judge, moderator and ceo took three of the labels already.
	if len(distinct) != MaxDeciderLabels-3+1 || !distinct[otherLabel] || l.label(many, "judge") != otherLabel || l.label(ch, "judge") != "judge" {
		t.Errorf("%d distinct labels", len(distinct))
	}
	for _, k := range []binding.Kind{binding.KindOption, binding.KindAnswer, binding.KindQuestion, binding.KindDeclined} {
		if resolutionLabel(k) != string(k) {
			t.Error(k)
		}
	}
	if resolutionLabel("x") != otherLabel {
		t.Error("an unknown kind is a label")
	}
}
