package canon_test

import (
	"errors"
	"fmt"

	"github.com/parley-engine/parley/canon"
)

func ExampleID() {
	id, err := canon.ID([]byte(`{"b": 2, "a": 1}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(id)
	// Output: sha256:43258cff783fe7036d8a43033f830adfc60ec037382473548ac742b888292777
}

func ExampleCanonicalize() {
	out, _ := canon.Canonicalize(canon.AMD, []byte(`{"text": "e\u0301", "n": -0, "list": [3, 1]}`))
	fmt.Printf("%+q\n", out) // AMD composes e + U+0301 to U+00E9
	out, _ = canon.Canonicalize(canon.JCS, []byte(`{"n": 1.0, "text": "e\u0301"}`))
	fmt.Printf("%+q\n", out) // JCS keeps the code points as they are
	// Output:
	// "{\"list\":[3,1],\"n\":0,\"text\":\"\u00e9\"}"
	// "{\"n\":1,\"text\":\"e\u0301\"}"
}

func ExampleError() {
	_, err := canon.ID([]byte(`{"a": 1, "a": 2}`))
	var ce *canon.Error
	if errors.As(err, &ce) {
		fmt.Println(ce.Class, ce.Code, ce.Offset)
	}
	fmt.Println(errors.Is(err, canon.ErrDuplicateName))
	// Output:
	// malformed_input json.duplicate_name 9
	// true
}
