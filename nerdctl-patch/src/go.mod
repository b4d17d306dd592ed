// The package nerdctl-patch/0001 adds, where it stands: go vet and go test
// run here against the versions nerdctl v1.7.7 requires. Not part of the
// series (nerdctl's own go.mod requires each of these, at these versions).
module github.com/containerd/nerdctl

go 1.21

require (
	github.com/containerd/cgroups/v3 v3.0.3
	github.com/containerd/log v0.1.0
	github.com/google/go-cmp v0.6.0
	github.com/moby/sys/mountinfo v0.6.2
	golang.org/x/sys v0.19.0
	gotest.tools/v3 v3.5.1
)

require (
	github.com/cilium/ebpf v0.11.0 // indirect
	github.com/coreos/go-systemd/v22 v22.5.0 // indirect
	github.com/godbus/dbus/v5 v5.1.0 // indirect
	github.com/opencontainers/runtime-spec v1.1.0 // indirect
	github.com/sirupsen/logrus v1.9.3 // indirect
	golang.org/x/exp v0.0.0-20231006140011-7918f672742d // indirect
	google.golang.org/protobuf v1.33.0 // indirect
)
