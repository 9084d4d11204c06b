package packaging

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// vagrantRecorder evaluates the Vagrantfile with a stand-in for Vagrant that
// records every setting (a path of method names and block arguments, and a
// value) and prints them as JSON: the Vagrantfile is run, not grepped.
const vagrantRecorder = `
require "json"
LOG = []
class Recorder
  def initialize(path) @path = path end
  def method_missing(name, *args, &blk)
    n = name.to_s
    if n.end_with?("=")
      LOG << [@path + [n.chomp("=")], args[0]]
      return args[0]
    end
    LOG << [@path + [n], args] unless args.empty?
    blk.call(Recorder.new(@path + [n] + args.map { |a| a.is_a?(String) ? a : a.to_s })) if blk
    Recorder.new(@path + [n])
  end
  def respond_to_missing?(*) true end
end
module Vagrant
  def self.configure(version)
    raise "configure(#{version.inspect}), want \"2\"" unless version == "2"
    yield Recorder.new([])
  end
end
load ARGV[0]
puts JSON.generate(LOG)
`

type vagrantSetting struct {
	path  string // e.g. "vm.define.debian-12.vm.box"
	value any
}

func vagrantSettings(t *testing.T) []vagrantSetting {
	t.Helper()
	out, err := exec.Command("ruby", "-e", vagrantRecorder, filepath.Join(repo, "Vagrantfile")).Output()
	if err != nil {
		t.Fatalf("evaluating the Vagrantfile: %v\n%s", err, out)
	}
	var raw [][2]any
	if err := json.Unmarshal(out, &raw); err != nil {
		t.Fatal(err)
	}
	var s []vagrantSetting
	for _, r := range raw {
		var parts []string
		for _, p := range r[0].([]any) {
			parts = append(parts, p.(string))
		}
		s = append(s, vagrantSetting{strings.Join(parts, "."), r[1]})
	}
	return s
}

func TestVagrantfileParses(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("ruby", "-c", filepath.Join(repo, "Vagrantfile")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Syntax OK") {
		t.Fatalf("ruby -c Vagrantfile: %v\n%s", err, out)
	}
}

// TestVagrantBoxes: the matrix is Ubuntu 24.04, Debian 12 and a Fedora,
// and every machine is provisioned by .ci/provision --vm, then make deps.
func TestVagrantBoxes(t *testing.T) {
	t.Parallel()
	boxes := map[string]string{}
	var provision []string
	for _, s := range vagrantSettings(t) {
		if name, ok := strings.CutPrefix(s.path, "vm.define."); ok && strings.HasSuffix(name, ".vm.box") {
			boxes[strings.TrimSuffix(name, ".vm.box")] = s.value.(string)
		}
		if s.path == "vm.provision" {
			args := s.value.([]any)
			if len(args) != 2 || args[0] != "shell" {
				t.Fatalf("provisioner %v: want a shell provisioner", args)
			}
			provision = append(provision, args[1].(map[string]any)["inline"].(string))
		}
	}
	want := map[string]string{"ubuntu-24.04": "bento/ubuntu-24.04", "debian-12": "bento/debian-12", "fedora": "bento/fedora-latest"}
	if len(boxes) != len(want) {
		t.Errorf("machines = %v, want %v", boxes, want)
	}
	for name, box := range want {
		if boxes[name] != box {
			t.Errorf("machine %s: box %q, want %q", name, boxes[name], box)
		}
	}
	if len(provision) != 1 {
		t.Fatalf("%d shell provisioners, want 1", len(provision))
	}
	vm, deps := strings.Index(provision[0], "./.ci/provision --vm\n"), strings.Index(provision[0], "make deps\n")
	if vm < 0 || deps < vm || !strings.Contains(provision[0], "set -eu") {
		t.Errorf("provisioner must run .ci/provision --vm, then make deps, stopping at the first error:\n%s", provision[0])
	}
}
