// The `go test` probe: map iteration order in a test binary
// that `go test` builds and runs (linked with -s -w, as `go test` links the binaries it runs).
package probe

import (
	"fmt"
	"testing"
)

// Taken during package initialization, on the main OS thread (see probe.go beside).
var mapOrder, subtests string

func init() {
	m := map[string]int{}
	for i := 0; i < 16; i++ {
		m[fmt.Sprint("key", i)] = i
	}
	for k := range m {
		mapOrder += " " + k
	}
	// Subtests named in a map's order, as table-driven tests often are.
	cases := map[string]int{"alpha": 1, "beta": 2, "gamma": 3, "delta": 4, "epsilon": 5, "zeta": 6}
	for name := range cases {
		subtests += " " + name
	}
}

func TestProbe(t *testing.T) {
	fmt.Println("gotest.map:" + mapOrder)
	fmt.Println("gotest.subtests:" + subtests)
}
