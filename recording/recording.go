// Package recording reads and writes recorded deliberations, in two
// formats:
//
//   - the artifact log: one canonical artifact per line, in stream order:
//     the DAG of a deliberation, what engine closure reads;
//   - the stream recording: full fidelity. A header line
//     {"parley_recording":"stream","version":2,"deliberation":ID}, then one
//     line per message of the deliberation, in stream order: artifacts,
//     control messages and rejected submissions alike, with its stream
//     position, subject, time and exact bytes (base64), an artifact's
//     signature headers when it has them, and a hash chain:
//     {"position":N,"subject":…,"time":RFC3339Nano,"data":BASE64,["key":…,"signature":…,]"chain":HEX},
//     then a trailer {"parley_recording_end":true,"messages":N,"chain":HEX}
//     (with the live engine's state_digest when the exporter had it).
//     chain is SHA-256 over the previous line's chain (none for the first)
//     and the message's position, subject, time and bytes, each
//     length-prefixed, then, for a message with a signature header, the
//     key and the signature, each length-prefixed: a changed byte, a
//     removed or reordered line breaks it at that line, and a truncated
//     recording lacks its trailer or disagrees with its count. Version 1,
//     which had no signatures, is read as before (its chain is version 2's
//     for messages without signatures).
//
// Readers detect the format from the first line. Both stream: a recording
// of any length is read in constant memory (lines are bounded).
package recording

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/parley-engine/parley/signing"
)

// Format of a recording.
type Format string

// Formats.
const (
	Log    Format = "log"
	Stream Format = "stream"
)

// Message is one message of a recording. In an artifact log, Position is
// the line number and Subject and Time are empty.
type Message struct {
	Position uint64
	Subject  string
	Time     time.Time
	Data     []byte
	// Signature is an artifact's Parley-Key and Parley-Signature headers
	// (projector.SignatureOf), so that an audit verifies them again and an
	// import publishes them again; empty in a version 1 recording.
	Signature signing.Headers
}

// Version is the stream recording version the Writer writes; the Reader
// reads it and every earlier one.
const Version = 2

// Header is a stream recording's first line.
type Header struct {
	Recording    string `json:"parley_recording"`
	Version      int    `json:"version"`
	Deliberation string `json:"deliberation"`
}

type line struct {
	Position uint64    `json:"position"`
	Subject  string    `json:"subject"`
	Time     time.Time `json:"time"`
	Data     string    `json:"data"`
	Key      string    `json:"key,omitempty"`
	Sig      string    `json:"signature,omitempty"`
	Chain    string    `json:"chain"`
}

// Trailer is a stream recording's last line.
type Trailer struct {
	End         bool   `json:"parley_recording_end"`
	Messages    int    `json:"messages"`
	Chain       string `json:"chain"`
	StateDigest string `json:"state_digest,omitempty"`
}

// link computes the next chain value.
func link(prev [32]byte, m Message) [32]byte {
	h := sha256.New()
	h.Write(prev[:])
	var n [8]byte
	put := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	binary.BigEndian.PutUint64(n[:], m.Position)
	h.Write(n[:])
	put([]byte(m.Subject))
	put([]byte(m.Time.UTC().Format(time.RFC3339Nano)))
	put(m.Data)
	if m.Signature != (signing.Headers{}) {
		put([]byte(m.Signature.Key))
		put([]byte(m.Signature.Signature))
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// MaxLine bounds one line of a recording (a message of 4 MiB in base64,
// with room for the rest).
const MaxLine = 6 << 20

// ErrFormat reports a recording that is neither format.
var ErrFormat = errors.New("recording: not a parley recording")

// Reader reads a recording.
type Reader struct {
	r       *bufio.Reader
	format  Format
	header  Header
	n       uint64
	first   []byte // the first line, when it was a message (artifact log)
	buf     []byte
	chain   [32]byte
	broken  uint64 // the first message whose chain did not verify (1-based), 0 if none
	trailer *Trailer
	count   int
}

// ChainBroken returns the number (1-based, in the recording) of the first
// message whose chain does not verify, or 0.
func (r *Reader) ChainBroken() uint64 { return r.broken }

// Trailer returns a stream recording's trailer once Next has returned
// io.EOF; nil when the recording has none.
func (r *Reader) Trailer() *Trailer { return r.trailer }

// NewReader reads the first line to detect the format.
func NewReader(r io.Reader) (*Reader, error) {
	rd := &Reader{r: bufio.NewReaderSize(r, 1<<16)}
	first, err := rd.readLine()
	if err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("%w: empty", ErrFormat)
		}
		return nil, err
	}
	var h Header
	if json.Unmarshal(first, &h) == nil && h.Recording == "stream" {
		if h.Version < 1 || h.Version > Version {
			return nil, fmt.Errorf("%w: stream recording version %d", ErrFormat, h.Version)
		}
		rd.format, rd.header = Stream, h
		return rd, nil
	}
	rd.format, rd.first = Log, append([]byte(nil), first...)
	return rd, nil
}

// Format returns the detected format.
func (r *Reader) Format() Format { return r.format }

// Header returns a stream recording's header.
func (r *Reader) Header() Header { return r.header }

func (r *Reader) readLine() ([]byte, error) {
	r.buf = r.buf[:0]
	for {
		chunk, err := r.r.ReadSlice('\n')
		if len(r.buf)+len(chunk) > MaxLine {
			return nil, fmt.Errorf("recording: a line longer than %d bytes", MaxLine)
		}
		r.buf = append(r.buf, chunk...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF:
			if len(r.buf) == 0 {
				return nil, io.EOF
			}
			return r.buf, nil // a last line without its newline
		case err != nil:
			return nil, err
		}
		return r.buf[:len(r.buf)-1], nil
	}
}

// Next returns the next message; io.EOF at the end. Its Data is valid until
// the next call.
func (r *Reader) Next() (Message, error) {
	var b []byte
	if r.first != nil {
		b, r.first = r.first, nil
	} else {
		var err error
		if b, err = r.readLine(); err != nil {
			return Message{}, err
		}
	}
	r.n++
	if r.format == Log {
		return Message{Position: r.n, Data: b}, nil
	}
	if r.trailer != nil {
		return Message{}, fmt.Errorf("recording: line %d: a line after the trailer", r.n+1)
	}
	var t Trailer
	if json.Unmarshal(b, &t) == nil && t.End {
		r.trailer = &t
		if _, err := r.readLine(); err != io.EOF {
			return Message{}, fmt.Errorf("recording: line %d: a line after the trailer", r.n+2)
		}
		return Message{}, io.EOF
	}
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return Message{}, fmt.Errorf("recording: line %d: %w", r.n+1, err)
	}
	data, err := base64.StdEncoding.DecodeString(l.Data)
	if err != nil {
		return Message{}, fmt.Errorf("recording: line %d: data: %w", r.n+1, err)
	}
	if l.Position == 0 || l.Subject == "" {
		return Message{}, fmt.Errorf("recording: line %d: a message needs a position and a subject", r.n+1)
	}
	m := Message{Position: l.Position, Subject: l.Subject, Time: l.Time, Data: data}
	if r.header.Version >= 2 {
		m.Signature = signing.Headers{Key: l.Key, Signature: l.Sig}
	}
	r.chain = link(r.chain, m)
	r.count++
	if r.broken == 0 && hex.EncodeToString(r.chain[:]) != l.Chain {
		r.broken = r.n
	}
	return m, nil
}

// Count returns the messages read so far.
func (r *Reader) Count() int { return r.count }

// Chain returns the chain over the messages read so far.
func (r *Reader) Chain() string { return hex.EncodeToString(r.chain[:]) }

// Writer writes a recording.
type Writer struct {
	w      *bufio.Writer
	format Format
	chain  [32]byte
	count  int
	// StateDigest, when set before Close, goes into the trailer.
	StateDigest string
}

// NewWriter starts a recording of format f; a stream recording begins with
// its header.
func NewWriter(w io.Writer, f Format, deliberation string) (*Writer, error) {
	wr := &Writer{w: bufio.NewWriterSize(w, 1<<16), format: f}
	if f == Stream {
		h, _ := json.Marshal(Header{Recording: "stream", Version: Version, Deliberation: deliberation})
		wr.w.Write(append(h, '\n'))
	}
	return wr, nil
}

// Write writes one message (for an artifact log: its canonical bytes).
func (w *Writer) Write(m Message) error {
	if w.format == Log {
		w.w.Write(m.Data)
		return w.w.WriteByte('\n')
	}
	w.chain = link(w.chain, m)
	w.count++
	b, err := json.Marshal(line{Position: m.Position, Subject: m.Subject, Time: m.Time.UTC(), Data: base64.StdEncoding.EncodeToString(m.Data),
		Key: m.Signature.Key, Sig: m.Signature.Signature, Chain: hex.EncodeToString(w.chain[:])})
	if err != nil {
		return err
	}
	w.w.Write(b)
	return w.w.WriteByte('\n')
}

// Close writes a stream recording's trailer and flushes.
func (w *Writer) Close() error {
	if w.format == Stream {
		b, _ := json.Marshal(Trailer{End: true, Messages: w.count, Chain: hex.EncodeToString(w.chain[:]), StateDigest: w.StateDigest})
		w.w.Write(append(b, '\n'))
	}
	return w.w.Flush()
}
