// Package packaging tests what ships agentjail rather than agentjail itself:
// the provision script shared by `make deps` and the Vagrant boxes, the
// Vagrantfile, `make release`, the Dockerfile, the Kubernetes manifests, and
// the README and docs/, whose commands are run (docs_test.go). None of them
// needs a Docker engine, a hypervisor or a cluster: scripts run against fake
// package managers and real ones where they are harmless, and files are
// parsed strictly and checked field by field.
package packaging
