package wire_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/readmodel"
	"github.com/parley-engine/parley/signing"
	"github.com/parley-engine/parley/wire"
)

// docs/WIRE.md is the wire protocol for other implementations. These
// tests keep it honest: what it lists is what the code has, and what the
// code has, it lists.

const wireDoc = "../docs/WIRE.md"

func readWireDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(wireDoc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var tickRE = regexp.MustCompile("`([^`\n]+)`")

// spans returns the code spans (between single backticks) of text.
func spans(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range tickRE.FindAllStringSubmatch(text, -1) {
		out[m[1]] = true
	}
	return out
}

// section returns the text of the "## title" section (up to the next one).
func section(t *testing.T, doc, title string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n## "+title+"\n")
	if !ok {
		t.Fatalf("%s has no section %q", wireDoc, title)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// table returns the first column (its code span) of each row of the table
// whose header line is header.
func table(t *testing.T, doc, header string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n"+header+"\n")
	if !ok {
		t.Fatalf("%s has no table %q", wireDoc, header)
	}
	var out []string
	sc := bufio.NewScanner(strings.NewReader(rest))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "|") {
			break
		}
		cell := strings.TrimSpace(strings.Split(line, "|")[1])
		if strings.HasPrefix(cell, "---") {
			continue
		}
		m := tickRE.FindStringSubmatch(cell)
		if m == nil {
			t.Fatalf("table %q: row %q has no code span in its first column", header, line)
		}
		out = append(out, m[1])
	}
	return out
}

// sameSet reports the differences between what the doc lists and what
// the code has.
func sameSet(t *testing.T, what string, doc, code []string) {
	t.Helper()
	for _, c := range code {
		if !slices.Contains(doc, c) {
			t.Errorf("%s: the code has %q, which %s does not list", what, c, wireDoc)
		}
	}
	for _, d := range doc {
		if !slices.Contains(code, d) {
			t.Errorf("%s: %s lists %q, which the code does not have", what, wireDoc, d)
		}
	}
}

// stringConsts returns the exported string constants of the non-test Go
// files of dir, name to value, with the type each is declared with ("" for
// an untyped one).
func stringConsts(t *testing.T, dir string) (values, types map[string]string) {
	t.Helper()
	values, types = map[string]string{}, map[string]string{}
	for _, f := range goFiles(t, dir) {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				typ := ""
				if id, ok := vs.Type.(*ast.Ident); ok {
					typ = id.Name
				}
				for i, name := range vs.Names {
					if !name.IsExported() || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					values[name.Name], types[name.Name] = v, typ
				}
			}
		}
	}
	return values, types
}

func goFiles(t *testing.T, dir string) []*ast.File {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*ast.File
	fset := token.NewFileSet()
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

// Every subject the code makes is in the doc, and every subject pattern
// the doc shows is one the code makes; every exported string constant of
// wire appears in a code span.
func TestWireDoc_Subjects(t *testing.T) {
	doc := readWireDoc(t)
	ticks := spans(doc)
	const d, p = "<deliberation>", "<participant>"
	made := []string{
		wire.ArtifactSubject(d, p), wire.ControlSubject(d), wire.ImportSubject(d),
		wire.BindingSubject(d), wire.DeliberationFilter(d), wire.MicroPrefix + ".<endpoint>",
	}
	for _, s := range append(slices.Clone(made), append(wire.StreamSubjects, wire.StreamName)...) {
		if !ticks[s] {
			t.Errorf("%s does not show the subject %q", wireDoc, s)
		}
	}
	for s := range ticks {
		if strings.HasPrefix(s, wire.SubjectPrefix) && strings.Contains(s, "<") && !slices.Contains(made, s) {
			t.Errorf("%s shows the subject pattern %q, which the code does not make", wireDoc, s)
		}
	}
	values, _ := stringConsts(t, ".")
	for name, v := range values {
		found := false
		for s := range ticks {
			found = found || strings.Contains(s, v)
		}
		if !found {
			t.Errorf("wire.%s (%q) is in no code span of %s", name, v, wireDoc)
		}
	}
}

// The header table lists exactly the headers of the code: wire's, the
// signature's, the dedupe id and expected stream the client sets, and the
// micro service's error headers.
func TestWireDoc_Headers(t *testing.T) {
	doc := readWireDoc(t)
	values, _ := stringConsts(t, ".")
	code := []string{signing.KeyHeader, signing.SignatureHeader, jetstream.MsgIDHeader,
		jetstream.ExpectedStreamHeader, micro.ErrorHeader, micro.ErrorCodeHeader}
	for name, v := range values {
		if strings.HasSuffix(name, "Header") {
			code = append(code, v)
		}
	}
	sameSet(t, "headers", table(t, section(t, doc, "Headers"), "| header | on | value |"), code)
}

// The endpoint table lists exactly the endpoints microapi registers.
func TestWireDoc_Endpoints(t *testing.T) {
	doc := readWireDoc(t)
	var code []string
	for _, f := range goFiles(t, "../microapi") {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			switch fn := call.Fun.(type) {
			case *ast.Ident:
				if fn.Name != "add" {
					return true
				}
			case *ast.SelectorExpr:
				if fn.Sel.Name != "AddEndpoint" {
					return true
				}
			default:
				return true
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				name, _ := strconv.Unquote(lit.Value)
				code = append(code, wire.MicroPrefix+"."+name)
			}
			return true
		})
	}
	if len(code) < 10 {
		t.Fatalf("found only %v registered in microapi: has the registration changed?", code)
	}
	sameSet(t, "endpoints", table(t, doc, "| endpoint | request | answer |"), code)
}

// The API's error codes, the verdicts and the fold's rejection codes are
// listed exactly.
func TestWireDoc_Codes(t *testing.T) {
	doc := readWireDoc(t)
	values, types := stringConsts(t, "../api")
	var codes, verdicts []string
	for name, v := range values {
		switch {
		case strings.HasPrefix(name, "Code") && types[name] == "":
			codes = append(codes, v)
		case types[name] == "Verdict":
			verdicts = append(verdicts, v)
		}
	}
	sameSet(t, "api codes", table(t, doc, "| code | status | when |"), codes)
	sameSet(t, "verdicts", table(t, doc, "| outcome | meaning |"), verdicts)

	// The fold's codes: the list that ends the "Error codes" section.
	sec := section(t, doc, "Error codes")
	_, list, ok := strings.Cut(sec, "outcome:\n")
	if !ok {
		t.Fatal("the Error codes section has no list of the fold's codes")
	}
	sameSet(t, "projector codes", slices.Collect(mapKeys(spans(list))), projector.Codes)
}

func mapKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !yield(k) {
				return
			}
		}
	}
}

func jsonNames(v any) []string {
	var out []string
	rt := reflect.TypeOf(v)
	for i := range rt.NumField() {
		f := rt.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// The charter table lists exactly the charter's members; every limit and
// policy member is named; the figures are the code's.
func TestWireDoc_Charter(t *testing.T) {
	doc := readWireDoc(t)
	sameSet(t, "charter members", table(t, doc, "| member | |"), jsonNames(api.Charter{}))
	sec := spans(section(t, doc, "Control messages"))
	for _, v := range []any{projector.Limits{}, projector.Policy{}, projector.ProvenancePolicy{}, api.PageRequest{}} {
		for _, name := range jsonNames(v) {
			if !sec[name] && !strings.Contains(doc, `"`+name+`"`) {
				t.Errorf("%T's member %q is not in %s", v, name, wireDoc)
			}
		}
	}
	flat := strings.Join(strings.Fields(doc), " ")
	for _, phrase := range []string{
		fmt.Sprintf("at most %d bytes (`projector.MaxControlBytes`", projector.MaxControlBytes),
		fmt.Sprintf("at most %d bytes (`projector.MaxTitleBytes`)", projector.MaxTitleBytes),
		fmt.Sprintf("%d, `wire.DefaultPageLimit`", wire.DefaultPageLimit),
		fmt.Sprintf("at most %d, `wire.MaxPageLimit`", wire.MaxPageLimit),
		fmt.Sprintf("a limit out of 1 to %d", wire.MaxPageLimit),
		fmt.Sprintf("dedupe window of %d minutes (`ledger.DuplicateWindow`)", int(ledger.DuplicateWindow/time.Minute)),
		fmt.Sprintf("`%s` = `%s`", "parley.protocol", ledger.StreamConfig(1).Metadata["parley.protocol"]),
		fmt.Sprintf("backoff of %d ms doubling up to %d s, for up to %d s", client.DefaultBackoff.Milliseconds(),
			int(client.DefaultMaxBackoff.Seconds()), int(client.DefaultRetryFor.Seconds())),
		fmt.Sprintf("default %d;", projector.DefaultProvenanceK),
		fmt.Sprintf("default `%s`", strings.TrimSuffix(projector.DefaultProvenanceWindow.String(), "0s")),
	} {
		if !strings.Contains(flat, phrase) {
			t.Errorf("%s does not say %q", wireDoc, phrase)
		}
	}
	if readmodel.DefaultMinPositionWait != time.Second || !strings.Contains(flat, "up to a second (`readmodel.DefaultMinPositionWait`)") {
		t.Errorf("%s: the min_position wait is %s", wireDoc, readmodel.DefaultMinPositionWait)
	}
	cfg := ledger.StreamConfig(1)
	if err := ledger.Check(cfg); err != nil || cfg.Name != wire.StreamName || !cfg.AllowDirect || !cfg.AllowAtomicPublish {
		t.Errorf("the stream's configuration is not the one %s describes: %v", wireDoc, err)
	}
}

// The worked example: every byte it shows is recomputed, and the fold
// accepts the signed claim after the open, and refuses it unsigned.
func TestWireDoc_WorkedExample(t *testing.T) {
	doc := readWireDoc(t)
	_, block, ok := strings.Cut(doc, "```wire-example\n")
	if !ok {
		t.Fatal("no wire-example block")
	}
	block, _, _ = strings.Cut(block, "```")
	ex := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		k, v, _ := strings.Cut(line, " ")
		ex[k] = strings.TrimSpace(v)
	}
	check := func(key, want string) {
		t.Helper()
		if ex[key] != want {
			t.Errorf("%s: the example shows\n%s\nthe code makes\n%s", key, ex[key], want)
		}
	}

	raw := make([]byte, 32)
	for i := range raw {
		raw[i] = byte(i)
	}
	kp, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, raw)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()
	check("seed", string(seed))
	check("Parley-Key", pub)

	delib, token := ex["deliberation"], ex["participant"]
	if !wire.ValidDeliberation(delib) || !wire.ValidToken(token) {
		t.Fatalf("the example's deliberation %q or participant %q is not valid", delib, token)
	}
	a, err := events.Seal(events.Draft{Type: events.TypeClaim, Payload: &events.Claim{Statement: ex["statement"]}})
	if err != nil {
		t.Fatal(err)
	}
	id := a.ID.String()
	check("artifact_id", id)
	check("body", string(a.Canonical))
	check("subject", wire.ArtifactSubject(delib, token))
	// hashed: the canonical form without artifact_id, whose SHA-256 is the id.
	check("hashed", strings.Replace(string(a.Canonical), `"artifact_id":"`+id+`",`, "", 1))
	if sum := sha256.Sum256([]byte(ex["hashed"])); canon.DigestPrefix+hex.EncodeToString(sum[:]) != id {
		t.Errorf("the SHA-256 of hashed is not the artifact id")
	}
	if got, err := canon.Canonicalize(canon.AMD, []byte(ex["hashed"])); err != nil || string(got) != ex["hashed"] {
		t.Errorf("hashed is not canonical: %v", err)
	}
	msg, err := signing.Message(delib, token, id)
	if err != nil {
		t.Fatal(err)
	}
	check("signed", hex.EncodeToString(msg))
	if !strings.Contains(doc, fmt.Sprintf("in hex (%d bytes:", signing.MessageLen(token))) {
		t.Errorf("the example does not give the signed message's length, %d", signing.MessageLen(token))
	}
	h, err := signing.Sign(kp, delib, token, id)
	if err != nil {
		t.Fatal(err)
	}
	check("Parley-Signature", h.Signature)

	// The open, as the example shows it, on the control subject it names.
	var open string
	for _, line := range strings.Split(doc, "\n") {
		if s := strings.TrimSpace(line); strings.HasPrefix(s, `{"op":"open"`) && strings.Contains(s, pub) {
			open = s
		}
	}
	if open == "" || !strings.Contains(doc, "on `"+wire.ControlSubject(delib)+"`") {
		t.Fatalf("the example's open (binding %s) on %s is not in %s", pub, wire.ControlSubject(delib), wireDoc)
	}
	if len(open) > projector.MaxControlBytes {
		t.Fatalf("the example's open is %d bytes", len(open))
	}
	fold := func(sig signing.Headers) projector.Outcome {
		p := projector.New(projector.Options{})
		at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
		if out := p.Apply(projector.Msg{Seq: 1, Subject: wire.ControlSubject(delib), Data: []byte(open), Time: at}); out.Control != "open" {
			t.Fatalf("the example's open is not applied: %+v", out.Rejection)
		}
		return p.Apply(projector.Msg{Seq: 2, Subject: ex["subject"], Data: []byte(ex["body"]), Time: at.Add(time.Second), Signature: sig})
	}
	if out := fold(h); len(out.Accepted) != 1 || out.Accepted[0] != a.ID {
		t.Errorf("the signed claim is not accepted: %+v", out.Rejection)
	}
	if out := fold(signing.Headers{}); out.Rejection == nil || out.Rejection.Code != signing.ErrNoSignature.Code {
		t.Errorf("the unsigned claim is not refused %s: %+v", signing.ErrNoSignature.Code, out)
	}
	if !strings.Contains(doc, "`rejected`, `"+signing.ErrNoSignature.Code+"`") {
		t.Errorf("%s does not say the unsigned claim is refused %s", wireDoc, signing.ErrNoSignature.Code)
	}
}

// The relation table says which types each relation may target, as
// events.CheckRelation decides (a CLAIM's references, in one deliberation).
func TestWireDoc_Relations(t *testing.T) {
	doc := readWireDoc(t)
	rows := map[string]string{}
	_, rest, ok := strings.Cut(doc, "\n  | relation | may target |\n")
	if !ok {
		t.Fatal("no relation table")
	}
	for _, line := range strings.Split(rest, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, "|")
		if m := tickRE.FindStringSubmatch(cells[1]); m != nil {
			rows[m[1]] = strings.TrimSpace(cells[2])
		}
	}
	allows := func(cell string, typ events.Type) bool {
		if m := tickRE.FindStringSubmatch(cell); m != nil && strings.HasPrefix(cell, "the same as ") {
			cell = rows[m[1]]
		}
		if head, _, _ := strings.Cut(cell, ";"); strings.HasPrefix(head, "every type but ") {
			return !strings.Contains(head, string(typ))
		} else if head == "every type" {
			return true
		}
		head, _, _ := strings.Cut(cell, ";")
		head, _, _ = strings.Cut(head, ", of ")
		return slices.Contains(strings.Split(head, ", "), string(typ))
	}
	src := &events.Artifact{Type: events.TypeClaim}
	for _, rel := range []events.Relation{events.Supports, events.ObjectsTo, events.Revises, events.Supersedes, events.Decides, events.Considers} {
		cell, ok := rows[string(rel)]
		if !ok {
			t.Errorf("the relation table has no row for %s", rel)
			continue
		}
		for _, typ := range events.Types {
			err := events.CheckRelation(src, rel, events.Target{Type: typ, FinalDecision: typ == events.TypeDecision}, true)
			if got, want := err == nil, allows(cell, typ); got != want {
				t.Errorf("%s -> %s: the code allows it %v, %s says %v", rel, typ, got, wireDoc, want)
			}
		}
	}
}
