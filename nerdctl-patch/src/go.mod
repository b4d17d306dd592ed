// The package nerdctl-patch/0001 adds, where it stands: go vet and go test
// run here against the versions nerdctl v1.7.7 requires. Not part of the
// series (nerdctl's own go.mod already requires both).
module github.com/containerd/nerdctl

go 1.21

require (
	github.com/containerd/log v0.1.0
	golang.org/x/sys v0.19.0
)

require github.com/sirupsen/logrus v1.9.3 // indirect
