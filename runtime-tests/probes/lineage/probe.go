// Starts goroutines that block in system calls, so that the Go runtime starts a number of
// threads that varies with timing (as `go build` does), then exits.
package main

import (
	"sync"
	"syscall"
)

func main() {
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts := syscall.Timespec{Nsec: 2000000}
			syscall.Nanosleep(&ts, nil)
		}()
	}
	wg.Wait()
}
