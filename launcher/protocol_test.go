package launcher

import (
	"encoding/binary"
	"math"
	"reflect"
	"strings"
	"testing"
)

func body(fields ...string) []byte { return []byte(strings.Join(fields, "\x00") + "\x00") }

func TestParseBody(t *testing.T) {
	got, err := parseBody(body("22", "2", "4:0:inf", "7:1024:4096", "3", "--profile", "tier1", "", "1", "A=b=c"))
	if err != nil {
		t.Fatal(err)
	}
	want := Request{Umask: 0o22, Limits: []Limit{{4, 0, math.MaxUint64}, {7, 1024, 4096}},
		Args: []string{"--profile", "tier1", ""}, Env: []string{"A=b=c"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestParseBodyRefusesWhatIsNotARequest(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":              nil,
		"last field unended": []byte("22\x000\x000\x000"),
		"umask not octal":    body("9", "0", "0", "0"),
		"umask too large":    body("1777", "0", "0", "0"),
		"count past the end": body("22", "0", "5", "a", "0"),
		"negative count":     body("22", "-1", "0", "0"),
		"limit malformed":    body("22", "1", "4:0", "0", "0"),
		"limit resource":     body("22", "1", "99:0:0", "0", "0"),
		"limit value":        body("22", "1", "4:x:0", "0", "0"),
		"env missing":        body("22", "0", "1", "a"),
		"fields too many":    body("22", "0", "0", "0", "extra"),
	} {
		if r, err := parseBody(b); err == nil {
			t.Errorf("%s: parsed as %+v", name, r)
		}
	}
}

func TestBodyLen(t *testing.T) {
	head := []byte(Magic + "\x00\x00\x00\x00")
	binary.LittleEndian.PutUint32(head[4:], 1234)
	if n, err := bodyLen(head); err != nil || n != 1234 {
		t.Fatalf("bodyLen = %d, %v", n, err)
	}
	binary.LittleEndian.PutUint32(head[4:], MaxBody+1)
	if _, err := bodyLen(head); err == nil {
		t.Error("a body over MaxBody was taken")
	}
	if _, err := bodyLen([]byte("GET / HT")); err == nil || !strings.Contains(err.Error(), "not a request of agentjail-run") {
		t.Errorf("another protocol: %v", err)
	}
}
