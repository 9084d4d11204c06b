// Command firstbyte is BenchmarkBrokerFirstByte's minimal client: N times,
// it connects (to PROXY, or to TARGET when PROXY is "direct"), sends a
// CONNECT for TARGET and reads its answer when through a proxy, then sends
// a GET and reads the first byte of its answer. For each request it prints
// the seconds from its start to the connection, to the CONNECT answered and
// to the first byte, as curl's -w prints time_connect, time_pretransfer
// and time_starttransfer: the same measure without curl's own work for a
// proxy.
//
// Usage: firstbyte PROXY|direct TARGET N
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: firstbyte PROXY|direct TARGET N")
		os.Exit(2)
	}
	via, target := os.Args[1], os.Args[2]
	n, err := strconv.Atoi(os.Args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, "firstbyte: N:", err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for range n {
		connected, answered, first, err := request(via, target)
		if err != nil {
			fmt.Fprintln(os.Stderr, "firstbyte:", err)
			os.Exit(1)
		}
		fmt.Fprintf(out, "%.6f %.6f %.6f\n", connected.Seconds(), answered.Seconds(), first.Seconds())
	}
}

func request(via, target string) (connected, answered, first time.Duration, err error) {
	start := time.Now()
	addr := via
	if via == "direct" {
		addr = target
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, 0, 0, err
	}
	defer c.Close()
	connected = time.Since(start)
	answered = connected
	buf := make([]byte, 4096)
	if via != "direct" {
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		var got []byte
		for !strings.Contains(string(got), "\r\n\r\n") {
			k, err := c.Read(buf)
			if err != nil {
				return 0, 0, 0, fmt.Errorf("the CONNECT's answer: %w", err)
			}
			got = append(got, buf[:k]...)
		}
		if f := strings.Fields(string(got)); len(f) < 2 || f[1] != "200" {
			return 0, 0, 0, fmt.Errorf("the CONNECT's answer: %q", got)
		}
		answered = time.Since(start)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", target)
	if _, err := c.Read(buf); err != nil {
		return 0, 0, 0, fmt.Errorf("the answer: %w", err)
	}
	return connected, answered, time.Since(start), nil
}
