// Go probe (static): map order, crypto/rand, clock, pid, CPUs, raw directory order.
package main

import (
	"crypto/rand"
	"fmt"
	mrand "math/rand"
	"os"
	"runtime"
	"time"
)

// The map order is taken during package initialization, which Go runs on the main OS
// thread (locked to it): Go's per-thread random state makes map order depend on which thread
// a goroutine runs on, and the scheduler may move one after a slow system call
// (spec/determinism.md, limits).
var mapOrder string

func init() {
	m := map[string]int{}
	for i := 0; i < 16; i++ {
		m[fmt.Sprint("key", i)] = i
	}
	for k := range m {
		mapOrder += " " + k
	}
}

func main() {
	fmt.Println("go.map:" + mapOrder)
	b := make([]byte, 8)
	rand.Read(b)
	fmt.Printf("go.crypto: %x\n", b)
	fmt.Printf("go.mathrand: %d\n", mrand.Int63())
	fmt.Printf("go.time: %d\n", time.Now().Unix())
	fmt.Printf("go.ids: %d %d %d\n", os.Getpid(), runtime.NumCPU(), runtime.GOMAXPROCS(0))
	f, err := os.Open("input")
	if err == nil {
		names, _ := f.Readdirnames(-1)
		fmt.Println("go.readdir:", names)
		f.Close()
	}
	h, _ := os.Hostname()
	fmt.Println("go.hostname:", h)
}
