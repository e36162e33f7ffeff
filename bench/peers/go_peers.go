// Go peer for the pivgate PKI benchmarks: Go's crypto/x509 on the same
// files as pivgate. Standard library only; built by the benchmark with
// `go build`.
//
// Prints one line: "ok <median_ns> <count> [note]" or "error <reason>".
//
//	go_peers go-load <bundle.pem | dir> <iterations>
//	    x509.NewCertPool + AppendCertsFromPEM over the file (each file of a
//	    directory), as a Go TLS or verification program loads its roots.
//
//	go_peers go-verify <anchor.pem> <pool.pem> <leaf.pem> <unix_time> <iterations>
//	    Certificate.Verify of the leaf with the anchor as Roots and the pool
//	    as Intermediates (loaded once, as a service would); reports the median
//	    per Verify and the length of the chain found (anchor included).
package main

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Stop repeating a measurement once the runs so far took this long.
const runBudget = 5 * time.Second

func filesOf(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") && e.Type().IsRegular() {
			out = append(out, filepath.Join(path, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}

func goLoad(path string, iterations int) (time.Duration, int, error) {
	files, err := filesOf(path)
	if err != nil {
		return 0, 0, err
	}
	var times []time.Duration
	var total time.Duration
	count := 0
	for i := 0; i < iterations; i++ {
		t0 := time.Now()
		pool := x509.NewCertPool()
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return 0, 0, err
			}
			if !pool.AppendCertsFromPEM(data) {
				// DER files (a directory may hold .cer files).
				if c, err := x509.ParseCertificate(data); err == nil {
					pool.AddCert(c)
				}
			}
		}
		d := time.Since(t0)
		//lint:ignore SA1019 Subjects is deprecated for system pools only.
		count = len(pool.Subjects())
		times = append(times, d)
		total += d
		if total >= runBudget {
			break
		}
	}
	sort.Slice(times, func(a, b int) bool { return times[a] < times[b] })
	return times[(len(times)-1)/2], count, nil
}

func goVerify(anchor, pool, leafPath string, at int64, iterations int) (time.Duration, int, error) {
	roots := x509.NewCertPool()
	data, err := os.ReadFile(anchor)
	if err != nil {
		return 0, 0, err
	}
	if !roots.AppendCertsFromPEM(data) {
		return 0, 0, fmt.Errorf("no certificate in %s", anchor)
	}
	inter := x509.NewCertPool()
	if data, err = os.ReadFile(pool); err != nil {
		return 0, 0, err
	}
	inter.AppendCertsFromPEM(data)
	if data, err = os.ReadFile(leafPath); err != nil {
		return 0, 0, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return 0, 0, fmt.Errorf("no PEM in %s", leafPath)
	}
	opts := x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		CurrentTime:   time.Unix(at, 0),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	}
	var times []time.Duration
	var total time.Duration
	length := 0
	for i := 0; i < iterations; i++ {
		t0 := time.Now()
		leaf, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return 0, 0, err
		}
		chains, err := leaf.Verify(opts)
		d := time.Since(t0)
		if err != nil {
			return 0, 0, err
		}
		length = len(chains[0])
		times = append(times, d)
		total += d
		if total >= runBudget {
			break
		}
	}
	sort.Slice(times, func(a, b int) bool { return times[a] < times[b] })
	return times[(len(times)-1)/2], length, nil
}

func main() {
	if len(os.Args) == 7 && os.Args[1] == "go-verify" {
		at, err1 := strconv.ParseInt(os.Args[5], 10, 64)
		n, err2 := strconv.Atoi(os.Args[6])
		if err1 != nil || err2 != nil || n < 1 {
			fmt.Println("error go-verify: time and iterations must be numbers")
			os.Exit(2)
		}
		median, length, err := goVerify(os.Args[2], os.Args[3], os.Args[4], at, n)
		if err != nil {
			fmt.Printf("error %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("ok %d %d\n", median.Nanoseconds(), length)
		return
	}
	if len(os.Args) != 4 || os.Args[1] != "go-load" {
		fmt.Println("error usage: go_peers go-load <bundle.pem | dir> <iterations>")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[3])
	if err != nil || n < 1 {
		fmt.Println("error iterations must be a positive number")
		os.Exit(2)
	}
	median, count, err := goLoad(os.Args[2], n)
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("ok %d %d\n", median.Nanoseconds(), count)
}
