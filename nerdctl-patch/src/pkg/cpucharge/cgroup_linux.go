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
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup2"
	"github.com/moby/sys/mountinfo"
)

// readMountinfo finds the cpu controller's hierarchy in a
// /proc/<pid>/mountinfo file.
func readMountinfo(path string) (mount, error) {
	f, err := os.Open(path)
	if err != nil {
		return mount{}, err
	}
	defer f.Close()
	return parseMountinfo(f)
}

// parseMountinfo returns the first cgroup v1 mount with the cpu controller
// (v1 and hybrid systems), else the first cgroup v2 mount. This, and not
// cgroups.Mode(), tells v1 from v2: the charger needs the hierarchy's
// mount point and root anyway, Mode() looks only at /sys/fs/cgroup of the
// real host (not under Options.Root), and on a hybrid system whose cpu
// controller is not bound to v1 (cgroup_no_v1=cpu) the controller is on
// v2 although Mode() says Hybrid.
func parseMountinfo(r io.Reader) (mount, error) {
	mounts, err := mountinfo.GetMountsFromReader(r, func(m *mountinfo.Info) (skip, stop bool) {
		switch m.FSType {
		case "cgroup":
			if hasToken(m.VFSOptions, "cpu") {
				return false, true
			}
		case "cgroup2":
			return false, false
		}
		return true, false
	})
	if err != nil {
		return mount{}, err
	}
	var v2 *mount
	for _, m := range mounts {
		if m.FSType == "cgroup" {
			return mount{point: m.Mountpoint, root: m.Root, v1: true}, nil
		}
		if v2 == nil {
			v2 = &mount{point: m.Mountpoint, root: m.Root}
		}
	}
	if v2 == nil {
		return mount{}, errors.New("no cgroup file system with the cpu controller is mounted")
	}
	return *v2, nil
}

// mountPointWithSuffix returns the first mount point in a
// /proc/<pid>/mountinfo file that ends with suffix; "" if there is none or
// the file cannot be read.
func mountPointWithSuffix(path, suffix string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	mounts, err := mountinfo.GetMountsFromReader(f, func(m *mountinfo.Info) (skip, stop bool) {
		if strings.HasSuffix(m.Mountpoint, suffix) {
			return false, true
		}
		return true, false
	})
	if err != nil || len(mounts) == 0 {
		return ""
	}
	return mounts[0].Mountpoint
}

// readProcCgroup returns a process's cgroup from /proc/<pid>/cgroup: the
// cpu controller's on cgroup v1, the unified one ("0::") on v2.
func readProcCgroup(path string, v1 bool) (string, error) {
	controllers, unified, err := cgroups.ParseCgroupFileUnified(path)
	if err != nil {
		return "", err
	}
	if v1 {
		if p, ok := controllers["cpu"]; ok {
			return p, nil
		}
	} else if unified != "" {
		return unified, nil
	}
	return "", fmt.Errorf("%s: no cgroup for the cpu controller", path)
}

// cpuControllerListed reports whether the cgroup.controllers of dir, a
// cgroup of the hierarchy mounted at top, lists the cpu controller; ok is
// false where there is no such file to read (cgroup v1).
func cpuControllerListed(top, dir string) (listed, ok bool) {
	rel, err := filepath.Rel(top, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return false, false
	}
	m, err := cgroup2.Load(filepath.Join("/", rel), cgroup2.WithMountpoint(top))
	if err != nil {
		return false, false
	}
	controllers, err := m.Controllers()
	if err != nil {
		return false, false
	}
	for _, c := range controllers {
		if c == "cpu" {
			return true, true
		}
	}
	return false, true
}

// hasToken reports whether the comma-separated list has tok ("cpu" is not
// "cpuset" nor "cpuacct").
func hasToken(list, tok string) bool {
	for _, t := range strings.Split(list, ",") {
		if t == tok {
			return true
		}
	}
	return false
}
