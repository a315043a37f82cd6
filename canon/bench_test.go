package canon_test

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/parley-engine/parley/canon"
)

// benchCorpus builds n artifact-shaped documents of 0.3-6 KB: mostly ASCII
// prose with some mixed scripts (Latin accents, Greek, Cyrillic, CJK, Hangul,
// emoji), members in shuffled order, and varied whitespace. One document in
// nfdEvery (every one when nfdEvery is 1) also carries decomposed sequences
// that NFC must compose, the costly case. The same arguments give the same
// corpus.
func benchCorpus(n, nfdEvery int) [][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("the claim holds because evidence from the trace shows latency under load " +
		"remains bounded while the objection argues that the sample is too small to decide " +
		"revision narrows scope decision records outcome with dispositions for each blocking objection")
	nfc := []string{"café", "naïve", "Zürich", "Ελληνικά", "данные", "数据中心", "検証済み", "🙂", "ﬁle", "정책"}
	nfd := append([]string{"e\u0301tude", "A\u030angstro\u0308m"}, nfc...)
	mixed := nfc
	text := func(nwords int) string {
		var b strings.Builder
		for i := 0; i < nwords; i++ {
			if i > 0 {
				b.WriteByte(' ')
			}
			if rng.IntN(12) == 0 {
				b.WriteString(mixed[rng.IntN(len(mixed))])
			} else {
				b.WriteString(words[rng.IntN(len(words))])
			}
		}
		return b.String()
	}
	hexid := func() string {
		const h = "0123456789abcdef"
		var b [64]byte
		for i := range b {
			b[i] = h[rng.IntN(16)]
		}
		return "sha256:" + string(b[:])
	}
	ws := func() string { return []string{"", " ", "\n  ", "\t"}[rng.IntN(4)] }
	obj := func(members []string) string {
		rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		return "{" + ws() + strings.Join(members, ","+ws()) + ws() + "}"
	}
	docs := make([][]byte, n)
	for i := range docs {
		mixed = nfc
		if rng.IntN(nfdEvery) == 0 {
			mixed = nfd
		}
		target := 300 + rng.IntN(5700)
		var refs []string
		for r := 0; r < 1+rng.IntN(4); r++ {
			refs = append(refs, obj([]string{`"artifact_id":` + ws() + `"` + hexid() + `"`, `"relation":"supports"`}))
		}
		// Grow the payload text until the document reaches its target size.
		nwords := max(4, target/7)
		payload := obj([]string{
			`"statement":"` + text(nwords) + `"`,
			`"content":"` + text(nwords/4) + `"`,
			`"provenance_class":"EXTERNAL_EVIDENCE"`,
			fmt.Sprintf(`"rank":%d`, rng.IntN(1000)-500),
			`"blocking":false`,
		})
		doc := obj([]string{
			`"protocol_version":"0.1"`,
			`"artifact_type":"EVIDENCE"`,
			`"payload":` + ws() + payload,
			`"references":[` + strings.Join(refs, ","+ws()) + `]`,
			`"extensions":` + obj([]string{`"parley.round":` + fmt.Sprint(rng.IntN(12)), `"parley.note":"` + text(6) + `"`}),
		})
		docs[i] = []byte(doc)
	}
	return docs
}

func corpusBytes(docs [][]byte) int64 {
	var n int64
	for _, d := range docs {
		n += int64(len(d))
	}
	return n
}

// BenchmarkCorpus runs canon+id beside raw SHA-256 over the same bytes and
// beside jsontext's Canonicalize, in one run, so their ratio is measured on
// the same machine state. The MB/s column is input bytes per second.
func BenchmarkCorpus(b *testing.B) {
	b.Run("corpus=mixed", func(b *testing.B) { benchCorpusRun(b, benchCorpus(512, 8)) })
	b.Run("corpus=nfd-heavy", func(b *testing.B) { benchCorpusRun(b, benchCorpus(512, 1)) })
	// What publishers send: the mixed corpus in canonical form, which ID's
	// fast path takes.
	b.Run("corpus=canonical", func(b *testing.B) {
		docs := benchCorpus(512, 8)
		for i, d := range docs {
			c, err := canon.Canonicalize(canon.AMD, d)
			if err != nil {
				b.Fatal(err)
			}
			docs[i] = c
		}
		benchCorpusRun(b, docs)
	})
}

func benchCorpusRun(b *testing.B, docs [][]byte) {
	size := corpusBytes(docs)
	b.Run("sha256", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			for _, d := range docs {
				sha256.Sum256(d)
			}
		}
	})
	b.Run("canon+id", func(b *testing.B) {
		c := canon.New(canon.AMD)
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			for _, d := range docs {
				if _, _, err := c.ID(d); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("jcs+digest", func(b *testing.B) {
		c := canon.New(canon.JCS)
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			for _, d := range docs {
				if _, _, err := c.Digest(d); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("jsontext.Canonicalize", func(b *testing.B) {
		buf := make(jsontext.Value, 0, 8192)
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			for _, d := range docs {
				buf = append(buf[:0], d...)
				if err := buf.Canonicalize(); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
