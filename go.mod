module github.com/agentjail/agentjail

go 1.26.0

require (
	github.com/goccy/go-yaml v1.19.2
	github.com/opencontainers/runtime-spec v1.3.0
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	github.com/seccomp/libseccomp-golang v0.11.1
	github.com/urfave/cli/v3 v3.14.0
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.49.0
)

require golang.org/x/text v0.43.0 // indirect
