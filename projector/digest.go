package projector

import (
	"crypto/sha256"
	"hash"
	"slices"
	"strconv"

	"github.com/parley-engine/parley/canon"
)

// StateDigest is a SHA-256 over a canonical rendering of the deliberation's
// projection: its title, status, charter, every artifact in the DAG with
// its participant and type, the open blocking objections, and every
// rejection and late artifact (as two hash chains, so that the digest does
// not depend on which of them the engine still keeps in detail) with the
// counts by code and the totals. Where
// the rendering names a message it uses its ordinal among the
// deliberation's messages, not its stream position, and the deliberation's
// id is not in it: the same messages in the same order give the same
// digest, live or replayed, in this stream or imported into another under
// another id. Tips and counts are functions of what is hashed.
//
// It is computed once per state: the result is kept for the position it
// was computed at (many readers may ask at once; they compute the same
// value).
func (d *Deliberation) StateDigest() canon.Digest {
	key := digestKey{position: d.Position, messages: d.seqs.len()}
	if c := d.digest.Load(); c != nil && c.key == key {
		return c.digest
	}
	out := d.computeDigest(false)
	d.digest.Store(&cachedDigest{key, out})
	return out
}

// LegacyStateDigest is the digest as engines computed it before the
// chains ("parley-state-v2" over the most recent MaxKept rejections and
// late artifacts in detail), for a recording exported by one of them; ok
// is false when it is the same as StateDigest (no rejection and no late
// artifact: both renderings agree) or cannot be computed (the byte bound
// dropped kept items the old rendering named).
func (d *Deliberation) LegacyStateDigest() (canon.Digest, bool) {
	if d.rejTotal == 0 && d.lateN == 0 {
		return canon.Digest{}, false
	}
	if len(d.rejects.list()) < min(d.rejTotal, d.opts.MaxKept) || len(d.late.list()) < min(d.lateN, d.opts.MaxKept) {
		return canon.Digest{}, false
	}
	return d.computeDigest(true), true
}

// chain extends a hash chain with one line: SHA-256 of the previous link
// and the line's parts, separated by spaces.
func chain(prev canon.Digest, kind string, ordinal uint64, parts ...string) canon.Digest {
	var buf [512]byte
	b := append(buf[:0], prev[:]...)
	b = append(b, kind...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, ordinal, 10)
	for _, p := range parts {
		b = append(b, ' ')
		b = append(b, p...)
	}
	return sha256.Sum256(b)
}

// digestKey names a state of a deliberation: every message applied to it
// moves its position or adds to its messages.
type digestKey struct {
	position uint64
	messages int
}

type cachedDigest struct {
	key    digestKey
	digest canon.Digest
}

func (d *Deliberation) computeDigest(legacy bool) canon.Digest {
	w := digestWriter{h: sha256.New(), buf: make([]byte, 0, 16<<10)}
	u := func(seq uint64) string { return strconv.FormatUint(d.Ordinal(seq), 10) }
	q := strconv.Quote
	// v2 still for a deliberation with no rejection and no late artifact:
	// its rendering is what it was when pending artifacts existed (they
	// added lines, and now never occur) and before the chains, so a
	// recording made then audits to the digest the engine reported. v3
	// names the rejections and late artifacts by their chains.
	chains := !legacy && (d.rejTotal > 0 || d.lateN > 0)
	if chains {
		w.line("parley-state-v3")
	} else {
		w.line("parley-state-v2")
	}
	// The last message of the record (a checkpoint after it is none).
	last := d.Position
	if last == d.ckptAt && last != 0 {
		last = d.seqs.lastPos()
	}
	w.line("deliberation", q(d.Title), string(d.Status), u(d.OpenedAt), u(last), strconv.Itoa(d.Round))
	if d.Charter != nil {
		w.line("participants", q(string(mustJSON(d.Charter.Participants))))
		w.line("limits", q(string(d.Charter.Limits)), "policy", q(string(d.Charter.Policy)))
		if len(d.Charter.Terminators) > 0 {
			w.line("terminators", q(string(mustJSON(d.Charter.Terminators))))
		}
		if d.Charter.Principal != "" {
			w.line("principal", q(d.Charter.Principal))
		}
		if len(d.Charter.Keys) > 0 {
			w.line("keys", q(string(mustJSON(d.Charter.Keys))), strconv.FormatBool(d.Charter.RequireSignatures))
		}
	}
	// The artifacts in stream order, which is the order they were
	// admitted in. Their ordinals come from one walk along the
	// deliberation's positions, which are in order too.
	ids := d.ids()
	c := d.seqs.cursor()
	more := c.next()
	for i := range d.nodes {
		n := &d.nodes[i]
		for more && c.pos < n.seq {
			more = c.next()
		}
		var ord uint64
		if more && c.pos == n.seq {
			ord = uint64(c.i + 1)
		}
		b := append(w.buf, "artifact "...)
		b = ids[i].AppendText(b)
		b = append(b, ' ')
		b = strconv.AppendUint(b, ord, 10)
		b = append(b, ' ')
		b = append(b, d.parts[n.part]...)
		b = append(b, ' ')
		b = append(b, typeOf[n.typ]...)
		w.buf = append(b, '\n')
		w.spill()
	}
	for _, id := range d.OpenBlockingObjections() {
		b := append(w.buf, "open "...)
		b = id.AppendText(b)
		w.buf = append(b, '\n')
		w.spill()
	}
	if chains {
		w.line("rejections", d.rejChain.String())
	} else {
		for _, r := range d.rejects.list() {
			w.line("rejection", u(r.Position), r.Code, r.ArtifactID, r.Participant)
		}
	}
	codes := make([]string, 0, len(d.rejCodes))
	for c := range d.rejCodes {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	for _, c := range codes {
		w.line("rejected", c, strconv.Itoa(d.rejCodes[c]))
	}
	if chains {
		w.line("late", d.lateChain.String())
	} else {
		for _, l := range d.late.list() {
			w.line("late", u(l.Position), l.ArtifactID, l.Participant)
		}
	}
	w.line("totals", strconv.Itoa(d.rejTotal), strconv.Itoa(d.lateN))
	w.h.Write(w.buf)
	var out canon.Digest
	w.h.Sum(out[:0])
	return out
}

// digestWriter gathers the digest's lines in a buffer and hashes it a
// block at a time.
type digestWriter struct {
	h   hash.Hash
	buf []byte
}

// line writes parts separated by spaces and a newline.
func (w *digestWriter) line(parts ...string) {
	for i, p := range parts {
		if i > 0 {
			w.buf = append(w.buf, ' ')
		}
		w.buf = append(w.buf, p...)
	}
	w.buf = append(w.buf, '\n')
	w.spill()
}

func (w *digestWriter) spill() {
	if len(w.buf) >= 12<<10 {
		w.h.Write(w.buf)
		w.buf = w.buf[:0]
	}
}
