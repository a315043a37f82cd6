package projector

import (
	"errors"
	"strconv"
	"strings"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/signing"
	"github.com/parley-engine/parley/wire"
)

// Codes of the rejections of an artifact for its signature (class
// signing.ClassSignature, "invalid_signature"), in a deliberation whose
// charter binds keys (docs/VERIFY.md).
var SignatureCodes = []string{signing.ErrNoSignature.Code, signing.ErrMalformed.Code, signing.ErrUnknownToken.Code,
	signing.ErrWrongKey.Code, signing.ErrBadSignature.Code}

// SignatureOf reads the signature headers (signing.KeyHeader,
// signing.SignatureHeader) of a message on subject from its header map (a
// nats.Header): empty unless subject is an artifact subject. A header
// given more than once is kept as its values joined with ", ", which is
// never a valid key or signature (the fold refuses it as
// signature.malformed), so that a recording can carry it as it came.
func SignatureOf(subject string, h map[string][]string) signing.Headers {
	if _, kind, _ := wire.Parse(subject); kind != "art" || len(h) == 0 {
		return signing.Headers{}
	}
	return signing.Headers{Key: strings.Join(h[signing.KeyHeader], ", "), Signature: strings.Join(h[signing.SignatureHeader], ", ")}
}

// signer returns the deliberation and the participant token whose
// signature m's artifact must carry: its subject's, or, for an
// importer's message, the subject's of the message it restores (the fold
// judges that message as its participant's). ok is false for a message
// nobody signs: a control message, the supervisor's (the engine's own key
// will sign it), an importer's message that restores none.
func signer(m *Msg) (delib, token string, ok bool) {
	delib, kind, token := wire.Parse(m.Subject)
	if kind == "art" && token == wire.ImportToken {
		if m.Import == nil || m.Import.Subject == "" {
			return "", "", false
		}
		var d string
		d, kind, token = wire.Parse(m.Import.Subject)
		if d != delib {
			return "", "", false
		}
	}
	return delib, token, kind == "art" && wire.ValidToken(token)
}

// PrepareSignature does ahead of the fold what costs in the check of an
// artifact's signature: with m's artifact validated (m.Artifact), it
// verifies m.Signature under the key it names (signing.VerifyKey) and
// records the verdict (m.SignatureChecked, m.SignatureErr), which needs no
// binding and so no state of the fold. It does nothing for an unsigned
// message or one nobody signs. Pure: a runner calls it on every core.
func PrepareSignature(m *Msg) {
	if m.Artifact == nil || m.Signature == (signing.Headers{}) {
		return
	}
	delib, token, ok := signer(m)
	if !ok {
		return
	}
	m.SignatureErr = signing.VerifyKey(delib, token, m.Artifact.ID.String(), m.Signature)
	m.SignatureChecked = true
}

// checkKeys validates a charter's key binding.
func checkKeys(ch *api.Charter) error {
	if err := signing.Binding(ch.Keys).Validate(); err != nil {
		return errors.New("charter: keys: " + err.Error())
	}
	if !ch.RequireSignatures {
		return nil
	}
	if len(ch.Keys) == 0 {
		return errors.New("charter: require_signatures without keys: nobody could publish")
	}
	for _, list := range [][]string{ch.Participants, ch.Terminators} {
		for _, t := range list {
			if _, ok := ch.Keys[t]; !ok {
				return errors.New("charter: require_signatures, and no key is bound to " + strconv.Quote(t))
			}
		}
	}
	return nil
}

// signatureRule checks the signature of a participant's artifact a
// (published as participant in m) against the charter's binding: nil when
// the charter binds no keys, for the supervisor's artifacts, for an
// unsigned artifact when the charter does not require signatures, and for
// a signature by the key bound to participant over this deliberation,
// participant and artifact; otherwise the signing error (signature.missing,
// .malformed, .unknown_token, .wrong_key, .bad, in signing.Verify's
// precedence). It uses the runner's verdict when there is one
// (PrepareSignature) and verifies itself otherwise (an offline fold).
func (d *Deliberation) signatureRule(m Msg, participant string, a *events.Artifact) error {
	// The supervisor's emissions are signed with the engine's key, which
	// no charter binds: the fold does not judge them (their subject is the
	// engine's alone); an auditor checks them with the keys they trust
	// (engine audit --trusted-key), as the signature names the
	// deliberation it was made in.
	if d.Charter == nil || len(d.Charter.Keys) == 0 || participant == wire.SupervisorToken {
		return nil
	}
	h := m.Signature
	if h == (signing.Headers{}) {
		if d.Charter.RequireSignatures {
			return signing.ErrNoSignature
		}
		return nil
	}
	if !m.SignatureChecked {
		return signing.Verify(d.ID, participant, a.ID.String(), h, d.Charter.Keys)
	}
	err := m.SignatureErr
	if errors.Is(err, signing.ErrMalformed) || errors.Is(err, signing.ErrInput) {
		return err
	}
	switch bound, ok := d.Charter.Keys[participant]; {
	case !ok:
		return &signing.Error{Code: signing.ErrUnknownToken.Code, Msg: signing.ErrUnknownToken.Msg + ": " + participant}
	case bound != h.Key:
		return signing.ErrWrongKey
	}
	return err
}
