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

func main() {
	m := map[string]int{}
	for i := 0; i < 16; i++ {
		m[fmt.Sprint("key", i)] = i
	}
	fmt.Print("go.map:")
	for k := range m {
		fmt.Print(" ", k)
	}
	fmt.Println()
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
