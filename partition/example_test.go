package partition_test

import (
	"fmt"

	"github.com/parley-engine/parley/partition"
	"github.com/parley-engine/parley/wire"
)

func ExampleOf() {
	const d = "0195b3c1-7c2a-7d4e-8f10-2a3b4c5d6e7f"
	p := partition.Of(d)
	mapped, _ := partition.Subject(wire.ArtifactSubject(d, "alice"))
	l, _ := partition.NewLayout(4)
	fmt.Println(p)
	fmt.Println(mapped)
	fmt.Println(l.Stream(d).Name())
	fmt.Println(partition.DeliberationFilter(d))
	// Output:
	// 19
	// parley.p.19.0195b3c1-7c2a-7d4e-8f10-2a3b4c5d6e7f.art.alice
	// PARLEY_0000_0255
	// parley.p.19.0195b3c1-7c2a-7d4e-8f10-2a3b4c5d6e7f.>
}

func ExampleMappingBlock() {
	fmt.Print(partition.MappingBlock(""))
	// Output:
	// mappings {
	//   "parley.*.art.*": "parley.p.{{partition(1024,1)}}.{{wildcard(1)}}.art.{{wildcard(2)}}"
	//   "parley.*.ctl": "parley.p.{{partition(1024,1)}}.{{wildcard(1)}}.ctl"
	//   "parley.p.*.*.art.*": "parley.refused"
	//   "parley.p.*.*.ctl": "parley.refused"
	// }
}
