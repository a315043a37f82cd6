// Package suggest finds, for a word a person mistyped on the command line
// (a command or a flag), the word they most likely meant, and words a
// flag.FlagSet's errors for people: one line, with the next step.
package suggest

import (
	"flag"
	"strings"
)

// Closest returns the candidate nearest to word: within an edit distance
// of a third of its length (at least 1, at most 3), or one that word is a
// prefix of, or that is a prefix of word; "" when none is near. Ties go to
// the earlier candidate.
func Closest(word string, candidates []string) string {
	if word == "" {
		return ""
	}
	limit := min(max(len(word)/3, 1), 3)
	best, bestD := "", limit+1
	for _, c := range candidates {
		d := distance(strings.ToLower(word), strings.ToLower(c))
		if d < bestD {
			best, bestD = c, d
		}
	}
	if best != "" {
		return best
	}
	for _, c := range candidates {
		if len(word) >= 3 && (strings.HasPrefix(c, word) || strings.HasPrefix(word, c)) {
			return c
		}
	}
	return ""
}

// distance is the Damerau-Levenshtein distance (optimal string alignment)
// of a and b, by bytes.
func distance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// FlagError words err, an error of fs.Parse, for a person: an unknown
// flag with the defined one it most likely means ("did you mean
// --deliberation?"), the others as the flag package says them.
func FlagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	const undefined = "flag provided but not defined: "
	if name, ok := strings.CutPrefix(msg, undefined); ok {
		name = strings.TrimLeft(name, "-")
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		s := "unknown flag --" + name
		if c := Closest(name, names); c != "" {
			s += ": did you mean --" + c + "?"
		}
		return s
	}
	return msg
}
