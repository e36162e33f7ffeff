// Trust-store peer: Go's crypto/x509 certificate pool.
//
//	trust_load BUNDLE.pem
//	trust_load --version
//
// Reads BUNDLE, adds it with x509.NewCertPool + AppendCertsFromPEM (which
// parses every certificate), prints how many the pool holds and exits.
// Built by pivgate-bench with `go build` (standard library only).
package main

import (
	"crypto/x509"
	"fmt"
	"os"
	"runtime"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: trust_load BUNDLE.pem")
		os.Exit(2)
	}
	if os.Args[1] == "--version" {
		fmt.Println(runtime.Version())
		return
	}
	pem, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		fmt.Fprintln(os.Stderr, "no certificate in", os.Args[1])
		os.Exit(1)
	}
	//lint:ignore SA1019 Subjects is the pool's only count.
	fmt.Println(len(pool.Subjects()))
}
