// Prints the wall clock as a Go program reads it (runtime vDSO path), from the main
// goroutine and another one.
package main

import (
	"fmt"
	"time"
)

func main() {
	fmt.Println("go", time.Now().Unix())
	done := make(chan int64)
	go func() { done <- time.Now().Unix() }()
	fmt.Println("goroutine", <-done)
}
