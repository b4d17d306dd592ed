//go:build !linux

/*
   Copyright The containerd Authors.

   Licensed under the Apache License, Version 2.0 (the "License");
   you may not use this file except in compliance with the License.
   You may obtain a copy of the License at

       http://www.apache.org/licenses/LICENSE-2.0

   Unless required by applicable law or agreed to in writing, software
   distributed under the License is distributed on an "AS IS" BASIS,
   WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
   See the License for the specific language governing permissions and
   limitations under the License.
*/

package cpucharge

import (
	"errors"
	"io"
)

// Cgroups are Linux's: elsewhere no container's cgroup is found, and
// Start charges nothing before it looks for one (newCPUSource).
var errNoCgroups = errors.New("cgroups are Linux's")

func readMountinfo(string) (mount, error) { return mount{}, errNoCgroups }

func parseMountinfo(io.Reader) (mount, error) { return mount{}, errNoCgroups }

func mountPointWithSuffix(_, _ string) string { return "" }

func readProcCgroup(string, bool) (string, error) { return "", errNoCgroups }

func cpuControllerListed(_, _ string) (listed, ok bool) { return false, false }
