package events

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// A small reader over canonical bytes. Validate runs it only on the output of
// canon, which is compact, escape-minimal and already checked, so it needs no
// error paths of its own: it walks members and items and decodes the
// canonical escapes.

// kindOf returns the JSON kind of a canonical value by its first byte:
// '{', '[', '"', 't', 'f', 'n', or '0' for numbers.
func kindOf(v []byte) byte {
	switch c := v[0]; c {
	case '{', '[', '"', 't', 'f', 'n':
		return c
	}
	return '0'
}

// end returns the index just past the value that starts at b[i].
func end(b []byte, i int) int {
	switch b[i] {
	case '"':
		// The next quote not escaped: one after an even run of
		// backslashes (canonical strings escape only \" \\ and controls).
		for j := i + 1; ; {
			q := nextQuote(b, j)
			k := q
			for k > i+1 && b[k-1] == '\\' {
				k--
			}
			if (q-k)%2 == 0 {
				return q + 1
			}
			j = q + 1
		}
	case '{', '[':
		depth := 0
		for j := i; ; j++ {
			switch b[j] {
			case '"':
				j = end(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
		j++
	}
	return j
}

// nextQuote returns the index of the first '"' at or after b[j] (there is
// one): byte by byte over the first 16 bytes, which is all most names and
// short values have, then with the vectorized search.
func nextQuote(b []byte, j int) int {
	for n := min(len(b), j+16); j < n; j++ {
		if b[j] == '"' {
			return j
		}
	}
	return bytes.IndexByte(b[j:], '"') + j
}

// members calls fn for each member of the canonical object obj, in order.
func members(obj []byte, fn func(name, value []byte) error) error {
	for i := 1; obj[i] != '}'; {
		if obj[i] == ',' {
			i++
		}
		ne := end(obj, i)
		name := obj[i+1 : ne-1]
		ve := end(obj, ne+1)
		if err := fn(name, obj[ne+1:ve]); err != nil {
			return err
		}
		i = ve
	}
	return nil
}

// items calls fn for each element of the canonical array arr.
func items(arr []byte, fn func(i int, v []byte) error) error {
	n := 0
	for i := 1; arr[i] != ']'; n++ {
		if arr[i] == ',' {
			i++
		}
		e := end(arr, i)
		if err := fn(n, arr[i:e]); err != nil {
			return err
		}
		i = e
	}
	return nil
}

// str decodes a canonical string value (quotes included).
func str(v []byte) string { return unquote(v[1 : len(v)-1]) }

// unquote decodes the body of a canonical string (quotes excluded).
func unquote(body []byte) string {
	plain := true
	for _, c := range body {
		if c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		return string(body)
	}
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		switch body[i] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u': // canonical form: \u00xx for other controls only
			n, _ := strconv.ParseUint(string(body[i+1:i+5]), 16, 8)
			out = utf8.AppendRune(out, rune(n))
			i += 4
		default: // '"' and '\\'
			out = append(out, body[i])
		}
	}
	return string(out)
}

// pointerEscape escapes a member name for a JSON pointer (RFC 6901).
func pointerEscape(s string) string {
	var out []byte
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '~':
			out = append(out, '~', '0')
		case '/':
			out = append(out, '~', '1')
		default:
			out = append(out, s[i])
		}
	}
	return string(out)
}
