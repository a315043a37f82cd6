package canon

// maxSafe is 2^53-1, the largest integer magnitude either profile admits.
const maxSafe = 1<<53 - 1

// numberToken scans the JSON number grammar at src[i:]:
//
//	-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
//
// and returns the end of the token and its parts. It reports a malformed
// number at the first byte that breaks the grammar.
type numberToken struct {
	neg              bool
	intStart, intEnd int // digits of the integer part
	fracStart        int // digits of the fraction part, fracStart==fracEnd when none
	fracEnd          int
	hasFrac, hasExp  bool
	expStart, expEnd int // exponent digits (sign excluded)
	expNeg           bool
	end              int
}

func scanNumber(src []byte, i int) (numberToken, *Error) {
	var t numberToken
	n := len(src)
	if src[i] == '-' {
		t.neg = true
		i++
	}
	t.intStart = i
	switch {
	case i >= n:
		return t, at(ErrInvalidNumber, i, "missing digits")
	case src[i] == '0':
		i++
	case src[i] >= '1' && src[i] <= '9':
		for i < n && src[i] >= '0' && src[i] <= '9' {
			i++
		}
	default:
		return t, at(ErrInvalidNumber, i, "missing digits")
	}
	t.intEnd = i
	t.fracStart, t.fracEnd = i, i
	if i < n && src[i] == '.' {
		t.hasFrac = true
		i++
		t.fracStart = i
		for i < n && src[i] >= '0' && src[i] <= '9' {
			i++
		}
		if i == t.fracStart {
			return t, at(ErrInvalidNumber, i, "missing fraction digits")
		}
		t.fracEnd = i
	}
	if i < n && (src[i] == 'e' || src[i] == 'E') {
		t.hasExp = true
		i++
		if i < n && (src[i] == '+' || src[i] == '-') {
			t.expNeg = src[i] == '-'
			i++
		}
		t.expStart = i
		for i < n && src[i] >= '0' && src[i] <= '9' {
			i++
		}
		if i == t.expStart {
			return t, at(ErrInvalidNumber, i, "missing exponent digits")
		}
		t.expEnd = i
	}
	// A digit right after a leading zero ("01") is not JSON.
	if i < n && src[i] >= '0' && src[i] <= '9' {
		return t, at(ErrInvalidNumber, i, "leading zero")
	}
	t.end = i
	return t, nil
}

// integerValue returns the magnitude of an integer-valued token whose value
// is at most maxSafe. It never builds a big number: the exponent saturates,
// and the digit count is checked before any arithmetic, so a token of any
// length costs one pass. ok=false with nonInt reports a value that is not an
// integer; ok=false without it, one out of range.
func integerValue(src []byte, t numberToken) (v uint64, nonInt bool, ok bool) {
	// The significant digits are the integer digits followed by the
	// fraction digits; the decimal point sits after nInt of them.
	nInt := t.intEnd - t.intStart
	total := nInt + (t.fracEnd - t.fracStart)
	digit := func(k int) byte {
		if k < nInt {
			return src[t.intStart+k]
		}
		return src[t.fracStart+k-nInt]
	}
	first, last := -1, -1
	for k := 0; k < total; k++ {
		if digit(k) != '0' {
			if first < 0 {
				first = k
			}
			last = k
		}
	}
	if first < 0 {
		return 0, false, true // zero, whatever the exponent and sign
	}
	var exp int64
	for k := t.expStart; k < t.expEnd; k++ {
		if exp < 1<<40 {
			exp = exp*10 + int64(src[k]-'0')
		}
	}
	if t.expNeg {
		exp = -exp
	}
	// value = D * 10^e, D = digits[first..last] (no trailing zero).
	e := int64(nInt-1-last) + exp
	if e < 0 {
		return 0, true, false
	}
	if int64(last-first+1)+e > 16 {
		return 0, false, false
	}
	for k := first; k <= last; k++ {
		v = v*10 + uint64(digit(k)-'0')
	}
	for ; e > 0; e-- {
		v *= 10
	}
	if v > maxSafe {
		return 0, false, false
	}
	return v, false, true
}
