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
	"os"
	"path/filepath"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func TestExpandSlice(t *testing.T) {
	for in, want := range map[string]string{
		"system.slice":      "/system.slice",
		"-.slice":           "/",
		"a-b-c.slice":       "/a.slice/a-b.slice/a-b-c.slice",
		"user-1000.slice":   "/user.slice/user-1000.slice",
		"kubepods-x.slice":  "/kubepods.slice/kubepods-x.slice",
		"a--b.slice":        "",
		"-a.slice":          "",
		"a-.slice":          "",
		"a.scope":           "",
		".slice":            "",
		"a/b.slice":         "",
		"slice":             "",
		"nerdctl.slice.bak": "",
	} {
		got, err := expandSlice(in)
		assert.Check(t, (err != nil) == (want == ""), "expandSlice(%q): err = %v", in, err)
		assert.Check(t, is.Equal(got, want), "expandSlice(%q)", in)
	}
}

const (
	mountinfoV2 = `22 27 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`
	mountinfoV1 = `22 27 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
25 23 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:8 - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate
34 25 0:29 / /sys/fs/cgroup/cpuset rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,cpuset
35 25 0:30 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,cpu,cpuacct
`
)

func TestParseMountinfo(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		want mount
	}{
		"v2":     {mountinfoV2, mount{point: "/sys/fs/cgroup", root: "/"}},
		"hybrid": {mountinfoV1, mount{point: "/sys/fs/cgroup/cpu,cpuacct", root: "/", v1: true}},
		"v1 without optional fields, escaped, subtree": {
			"35 25 0:30 /docker/x /sys/fs/cgroup/my\\040cpu rw - cgroup cgroup rw,cpuacct,cpu\n",
			mount{point: "/sys/fs/cgroup/my cpu", root: "/docker/x", v1: true},
		},
	} {
		got, err := parseMountinfo(strings.NewReader(tc.in))
		assert.Check(t, err, name)
		assert.Check(t, is.Equal(got, tc.want), name)
	}
	// cpuset and cpuacct alone are not the cpu controller.
	m, err := parseMountinfo(strings.NewReader(strings.SplitAfter(mountinfoV1, "\n")[3] +
		"36 25 0:31 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n"))
	assert.Check(t, err != nil, "found %+v without a cpu controller", m)
}

func TestCgroupPath(t *testing.T) {
	v2 := mount{point: "/sys/fs/cgroup", root: "/"}
	v1 := mount{point: "/sys/fs/cgroup/cpu,cpuacct", root: "/", v1: true}
	v1sub := mount{point: "/sys/fs/cgroup/cpu", root: "/docker/outer", v1: true}
	const id = "abc"
	for _, tc := range []struct {
		name, cgroupsPath string
		systemd           bool
		m                 mount
		self, init        string
		want              string // "" for an error
	}{
		{"v2 default (containerd)", "/default/abc", false, v2, "", "", "/default/abc"},
		{"v1 default", "/default/abc", false, v1, "", "", "/default/abc"},
		{"custom parent", "/myparent/abc", false, v2, "", "", "/myparent/abc"},
		{"nested custom parent", "/a/b/c/abc", false, v1, "", "", "/a/b/c/abc"},
		{"no escape", "/a/../../../etc/abc", false, v2, "", "", "/etc/abc"},
		{"v2 relative: to the parent of our cgroup", "myparent/abc", false, v2, "/system.slice/containerd.service", "", "/system.slice/myparent/abc"},
		{"v1 relative: to our cgroup", "myparent/abc", false, v1, "/system.slice/containerd.service", "", "/system.slice/containerd.service/myparent/abc"},
		{"v1 relative, mounted subtree", "p/abc", false, v1sub, "/docker/outer/shim", "", "/shim/p/abc"},
		{"relative cannot climb", "../../abc", false, v2, "/a/b", "", "/a/abc"},
		{"empty: the ID, relative", "", false, v2, "/x/y", "", "/x/abc"},
		{"systemd", "system.slice:nerdctl:abc", true, v2, "", "", "/system.slice/nerdctl-abc.scope"},
		{"systemd parent", "my-nested.slice:nerdctl:abc", true, v2, "", "", "/my.slice/my-nested.slice/nerdctl-abc.scope"},
		{"systemd empty slice", ":nerdctl:abc", true, v2, "", "", "/system.slice/nerdctl-abc.scope"},
		{"systemd root slice", "-.slice:nerdctl:abc", true, v2, "", "", "/nerdctl-abc.scope"},
		{"systemd no path", "", true, v2, "", "", "/system.slice/runc-abc.scope"},
		{"systemd slice as name", "system.slice:x:my.slice", true, v2, "", "", "/system.slice/my.slice"},
		{"systemd v1", "system.slice:nerdctl:abc", true, v1, "", "/init.scope", "/system.slice/nerdctl-abc.scope"},
		{"systemd v1, nested systemd", "system.slice:nerdctl:abc", true, v1, "", "/outer/init.scope", "/outer/system.slice/nerdctl-abc.scope"},
		{"systemd bad form", "system.slice:abc", true, v2, "", "", ""},
		{"systemd bad slice", "a--b.slice:nerdctl:abc", true, v2, "", "", ""},
		{"relative, no own cgroup", "p/abc", false, v2, "", "", ""},
	} {
		self := func() (string, error) {
			if tc.self == "" {
				return "", errors.New("no cgroup")
			}
			return tc.self, nil
		}
		init := func() (string, error) { return tc.init, nil }
		got, err := cgroupPath(bundle{cgroupsPath: tc.cgroupsPath, systemd: tc.systemd}, id, tc.m, self, init)
		assert.Check(t, (err != nil) == (tc.want == ""), "%s: err = %v", tc.name, err)
		assert.Check(t, is.Equal(got, tc.want), tc.name)
	}
}

func writeFile(t testing.TB, path, data string) {
	t.Helper()
	assert.NilError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	assert.NilError(t, os.WriteFile(path, []byte(data), 0o644))
}

func TestReadBundle(t *testing.T) {
	dir := t.TempDir()
	_, err := readBundle(dir)
	assert.Check(t, is.ErrorIs(err, errNotYet), "no config.json")
	writeFile(t, filepath.Join(dir, "config.json"), `{"ociVersion":"1.0.2","linux":{"cgroupsPath":"system.slice:nerdctl:abc"}}`)
	b, err := readBundle(dir)
	assert.Check(t, err, "systemd form, no options.json")
	assert.Check(t, b.systemd, "systemd form, no options.json: %+v", b)
	assert.Check(t, is.Equal(b.cgroupsPath, "system.slice:nerdctl:abc"), "systemd form, no options.json")
	writeFile(t, filepath.Join(dir, "options.json"), `{"binary_name":"runc"}`)
	b, err = readBundle(dir)
	assert.Check(t, err, "options.json without systemd_cgroup")
	assert.Check(t, !b.systemd, "options.json without systemd_cgroup: %+v; want cgroupfs", b)
	writeFile(t, filepath.Join(dir, "config.json"), `{"linux":{"cgroupsPath":"/default/abc"}}`)
	writeFile(t, filepath.Join(dir, "options.json"), `{"systemd_cgroup":true}`)
	b, err = readBundle(dir)
	assert.Check(t, err, "systemd_cgroup")
	assert.Check(t, b.systemd, "systemd_cgroup: %+v", b)
	writeFile(t, filepath.Join(dir, "options.json"), `{"systemdCgroup":true}`)
	b, err = readBundle(dir)
	assert.Check(t, err, "systemdCgroup")
	assert.Check(t, b.systemd, "systemdCgroup: %+v", b)
	writeFile(t, filepath.Join(dir, "config.json"), `{"linux":`)
	_, err = readBundle(dir)
	assert.Check(t, err != nil && !errors.Is(err, errNotYet), "broken config.json: err = %v", err)
}

// fakeHost is a fake root with /proc/self and a containerd bundle.
type fakeHost struct {
	root, bundle string
}

func newFakeHost(t testing.TB, mountinfo, procCgroup, cgroupsPath string) fakeHost {
	t.Helper()
	h := fakeHost{root: t.TempDir()}
	h.bundle = filepath.Join(taskStateDir, "default", "abc")
	writeFile(t, filepath.Join(h.root, "proc/self/mountinfo"), mountinfo)
	writeFile(t, filepath.Join(h.root, "proc/self/cgroup"), procCgroup)
	writeFile(t, filepath.Join(h.root, "proc/1/cgroup"), "0::/init.scope\n12:cpu,cpuacct:/init.scope\n")
	// Root, in the initial user namespace.
	writeFile(t, filepath.Join(h.root, "proc/self/status"), "Name:\tnerdctl\nCapEff:\t000001ffffffffff\n")
	writeFile(t, filepath.Join(h.root, "proc/self/uid_map"), "         0          0 4294967295\n")
	writeFile(t, filepath.Join(h.root, h.bundle, "config.json"),
		`{"linux":{"cgroupsPath":"`+cgroupsPath+`","resources":{"cpu":{"quota":50000,"period":100000}}}}`)
	return h
}

// startInit is the shim reporting the container's init process, in the
// cgroup that procCgroup (/proc/<pid>/cgroup) names.
func (h fakeHost) startInit(t testing.TB, procCgroup string) {
	t.Helper()
	writeFile(t, filepath.Join(h.root, h.bundle, "init.pid"), "77")
	writeFile(t, filepath.Join(h.root, "proc/77/cgroup"), procCgroup)
}

func TestLocator(t *testing.T) {
	for _, tc := range []struct {
		name, mountinfo, procCgroup, cgroupsPath, want string
	}{
		{"v2 cgroupfs", mountinfoV2, "0::/system.slice/containerd.service\n", "/default/abc", "/sys/fs/cgroup/default/abc"},
		{"v2 systemd", mountinfoV2, "0::/system.slice/containerd.service\n", "system.slice:nerdctl:abc", "/sys/fs/cgroup/system.slice/nerdctl-abc.scope"},
		{"v2 relative parent", mountinfoV2, "0::/system.slice/containerd.service\n", "par/abc", "/sys/fs/cgroup/system.slice/par/abc"},
		{"v1 cgroupfs", mountinfoV1, "12:cpu,cpuacct:/system.slice/containerd.service\n4:cpuset:/\n0::/x\n", "/default/abc", "/sys/fs/cgroup/cpu,cpuacct/default/abc"},
		{"v1 systemd", mountinfoV1, "12:cpu,cpuacct:/\n", "my-sub.slice:nerdctl:abc", "/sys/fs/cgroup/cpu,cpuacct/my.slice/my-sub.slice/nerdctl-abc.scope"},
		{"v1 relative", mountinfoV1, "4:cpuset:/a\n12:cpu,cpuacct:/system.slice/containerd.service\n", "par/abc", "/sys/fs/cgroup/cpu,cpuacct/system.slice/containerd.service/par/abc"},
	} {
		h := newFakeHost(t, tc.mountinfo, tc.procCgroup, tc.cgroupsPath)
		// The working directory is the bundle: it is used.
		l := locator{root: h.root, cwd: h.bundle, ns: "default", id: "abc"}
		got, fromInit, err := l.cgroupDir()
		assert.Check(t, err, tc.name)
		assert.Check(t, !fromInit, "%s: from the init process", tc.name)
		assert.Check(t, is.Equal(got, filepath.Join(h.root, tc.want)), "%s: want %q under the root", tc.name, tc.want)
	}

	// A working directory that is not the bundle (its base name is not
	// the ID) is not used: the default bundle is.
	h := newFakeHost(t, mountinfoV2, "0::/\n", "/default/abc")
	other := filepath.Join(h.root, "elsewhere")
	writeFile(t, filepath.Join(other, "config.json"), `{"linux":{"cgroupsPath":"/wrong"}}`)
	l := locator{root: h.root, cwd: "/elsewhere", ns: "default", id: "abc"}
	got, _, err := l.cgroupDir()
	assert.Check(t, err, "fallback bundle")
	assert.Check(t, is.Equal(got, filepath.Join(h.root, "/sys/fs/cgroup/default/abc")), "fallback bundle")
	// And a bundle elsewhere (rootless containerd) is found through the
	// working directory.
	writeFile(t, filepath.Join(h.root, "/run/user/1000/containerd/ns/abc/config.json"), `{"linux":{"cgroupsPath":"/rootless/abc"}}`)
	l = locator{root: h.root, cwd: "/run/user/1000/containerd/ns/abc", ns: "ns", id: "abc"}
	got, _, err = l.cgroupDir()
	assert.Check(t, err, "bundle in the working directory")
	assert.Check(t, is.Equal(got, filepath.Join(h.root, "/sys/fs/cgroup/rootless/abc")), "bundle in the working directory")
	// No bundle yet: wait.
	l = locator{root: h.root, cwd: "/", ns: "default", id: "nothere"}
	_, _, err = l.cgroupDir()
	assert.Check(t, is.ErrorIs(err, errNotYet), "no bundle")
}

func TestLocatorInitProcess(t *testing.T) {
	// crun's systemd driver: the spec names the scope, the runtime puts
	// the container (and its quota) in a child of it.
	for _, tc := range []struct {
		name, mountinfo, initCgroup, want string
	}{
		{"v2", mountinfoV2, "0::/system.slice/nerdctl-abc.scope/container\n", "/sys/fs/cgroup/system.slice/nerdctl-abc.scope/container"},
		{"v1", mountinfoV1, "4:cpuset:/\n12:cpu,cpuacct:/system.slice/nerdctl-abc.scope/container\n", "/sys/fs/cgroup/cpu,cpuacct/system.slice/nerdctl-abc.scope/container"},
	} {
		h := newFakeHost(t, tc.mountinfo, "0::/\n", "system.slice:nerdctl:abc")
		writeFile(t, filepath.Join(h.root, h.bundle, "init.pid"), "4242")
		writeFile(t, filepath.Join(h.root, "proc/4242/cgroup"), tc.initCgroup)
		l := locator{root: h.root, cwd: h.bundle, ns: "default", id: "abc"}
		got, fromInit, err := l.cgroupDir()
		assert.Check(t, err, tc.name)
		assert.Check(t, fromInit, "%s: want the init process's cgroup", tc.name)
		assert.Check(t, is.Equal(got, filepath.Join(h.root, tc.want)), "%s: want %q from the init process", tc.name, tc.want)
	}
	// The init process has gone (or init.pid is garbage): the spec is used.
	h := newFakeHost(t, mountinfoV2, "0::/\n", "/default/abc")
	writeFile(t, filepath.Join(h.root, h.bundle, "init.pid"), "4242")
	l := locator{root: h.root, cwd: h.bundle, ns: "default", id: "abc"}
	got, fromInit, err := l.cgroupDir()
	assert.Check(t, err, "init gone")
	assert.Check(t, !fromInit, "init gone: from the init process")
	assert.Check(t, is.Equal(got, filepath.Join(h.root, "/sys/fs/cgroup/default/abc")), "init gone")
	writeFile(t, filepath.Join(h.root, h.bundle, "init.pid"), "-1")
	_, fromInit, err = l.cgroupDir()
	assert.Check(t, err, "bad init.pid")
	assert.Check(t, !fromInit, "bad init.pid: from the init process")
}

// A containerd with another state directory (k3s's /run/k3s/containerd),
// and a logger that does not run in the bundle (nerdctl run without -d
// starts it in the user's directory): the bundle is found where the shim
// mounted the container's root file system, <bundle>/rootfs; a mount that
// is not a task's is not taken for one.
func TestLocatorFindsTheBundleByItsRootfs(t *testing.T) {
	const k3s = "/run/k3s/containerd/io.containerd.runtime.v2.task"
	h := newFakeHost(t, mountinfoV2, "0::/\n", "/default/abc")
	assert.NilError(t, os.RemoveAll(filepath.Join(h.root, taskStateDir)))
	writeFile(t, filepath.Join(h.root, k3s, "default/abc/config.json"), `{"linux":{"cgroupsPath":"/k3s/abc"}}`)
	writeFile(t, filepath.Join(h.root, "/home/u/abc/config.json"), `{"linux":{"cgroupsPath":"/not/this"}}`)
	tgt := &cgroupTarget{loc: locator{root: h.root, cwd: "/home/u", ns: "default", id: "abc"}}
	// Before the shim mounts it (the task is not created yet).
	_, err := tgt.locate()
	assert.Assert(t, is.ErrorIs(err, errNotYet), "before the rootfs is mounted")
	writeFile(t, filepath.Join(h.root, "proc/self/mountinfo"), mountinfoV2+
		`40 27 0:50 / /home/u/abc/rootfs rw - overlay overlay rw
41 27 0:51 / `+k3s+`/default/abc/rootfs rw,relatime - overlay overlay rw,lowerdir=/x
`)
	_, err = tgt.locate()
	assert.Assert(t, err, "with the rootfs mounted")
	assert.Assert(t, is.Equal(tgt.specDir, filepath.Join(h.root, "/sys/fs/cgroup/k3s/abc")), "with the rootfs mounted: want the k3s bundle's cgroup")
	assert.Check(t, is.Equal(tgt.loc.bundleDir(), k3s+"/default/abc"))
}

// Before the shim reports the init process, the target waits even when the
// spec's cgroup exists, and relies on the spec alone only after a while.
func TestCgroupTargetWaitsForInit(t *testing.T) {
	h := newFakeHost(t, mountinfoV2, "0::/\n", "system.slice:nerdctl:abc")
	scope := filepath.Join(h.root, "sys/fs/cgroup/system.slice/nerdctl-abc.scope")
	writeFile(t, filepath.Join(scope, FileName), "")
	writeFile(t, filepath.Join(scope, "container", FileName), "")
	writeFile(t, filepath.Join(scope, "container", "cpu.max"), "50000 100000\n")
	tgt := &cgroupTarget{loc: locator{root: h.root, cwd: h.bundle, ns: "default", id: "abc"}}
	for i := 0; i < 3; i++ {
		assert.Assert(t, is.ErrorIs(tgt.open(), errNotYet), "attempt %d without init.pid", i)
	}
	h.startInit(t, "0::/system.slice/nerdctl-abc.scope/container\n")
	assert.Assert(t, tgt.open(), "with init.pid")
	assert.Assert(t, is.Equal(tgt.dir, filepath.Join(scope, "container")), "with init.pid")
	tgt.close()

	// A runtime that never reports its init process: the spec, eventually.
	tgt = &cgroupTarget{loc: locator{root: h.root, cwd: h.bundle, ns: "default", id: "abc"}}
	assert.NilError(t, os.Remove(filepath.Join(h.root, h.bundle, "init.pid")))
	for i := 0; i <= maxSpecWaits; i++ {
		assert.Assert(t, is.ErrorIs(tgt.open(), errNotYet), "attempt %d, no init.pid, the scope without a quota", i)
	}
	writeFile(t, filepath.Join(scope, "cpu.max"), "50000 100000\n")
	assert.Assert(t, tgt.open(), "no init.pid ever")
	assert.Assert(t, is.Equal(tgt.dir, scope), "no init.pid ever: want the scope, once it has a quota")
	tgt.close()
}

// A container whose spec sets a quota: while the runtime is still setting
// its cgroup up (the systemd driver's scope can exist before the cpu
// controller is enabled for it and before its quota is applied), the
// target waits for it instead of giving up for the container's life.
func TestCgroupTargetWaitsForTheQuota(t *testing.T) {
	h := newFakeHost(t, mountinfoV2, "0::/\n", "system.slice:nerdctl:abc")
	scope := filepath.Join(h.root, "sys/fs/cgroup/system.slice/nerdctl-abc.scope")
	tgt := &cgroupTarget{loc: locator{root: h.root, cwd: h.bundle, ns: "default", id: "abc"}}
	assert.Assert(t, tgt.prepare(), "prepare")
	// The scope made, without the cpu controller yet; no init.pid: the
	// spec's cgroup, once the wait for the init process is over.
	writeFile(t, filepath.Join(scope, "cgroup.controllers"), "memory pids\n")
	for i := 0; i <= maxSpecWaits; i++ {
		assert.Assert(t, is.ErrorIs(tgt.open(), errNotYet), "attempt %d, the scope without the cpu controller", i)
	}
	// The controller enabled, the quota not applied yet.
	writeFile(t, filepath.Join(scope, "cgroup.controllers"), "cpu memory pids\n")
	writeFile(t, filepath.Join(scope, FileName), "")
	writeFile(t, filepath.Join(scope, "cpu.max"), "max 100000\n")
	assert.Assert(t, is.ErrorIs(tgt.open(), errNotYet), "the scope without its quota")
	h.startInit(t, "0::/system.slice/nerdctl-abc.scope\n")
	assert.Assert(t, is.ErrorIs(tgt.open(), errNotYet), "the init process's scope without its quota")
	writeFile(t, filepath.Join(scope, "cpu.max"), "50000 100000\n")
	assert.Assert(t, tgt.open(), "with the quota")
	assert.Assert(t, is.Equal(tgt.dir, scope), "with the quota")
	tgt.close()

	// A spec without a quota (one on an ancestor let prepare pass): a
	// cgroup without one is final, as before.
	h = newFakeHost(t, mountinfoV2, "0::/\n", "/default/abc")
	writeFile(t, filepath.Join(h.root, h.bundle, "config.json"), `{"linux":{"cgroupsPath":"/default/abc"}}`)
	writeFile(t, filepath.Join(h.root, "sys/fs/cgroup/default/cpu.max"), "50000 100000\n")
	writeFile(t, filepath.Join(h.root, "sys/fs/cgroup/default", FileName), "")
	cg := filepath.Join(h.root, "sys/fs/cgroup/default/abc")
	writeFile(t, filepath.Join(cg, FileName), "")
	writeFile(t, filepath.Join(cg, "cpu.max"), "max 100000\n")
	h.startInit(t, "0::/default/abc\n")
	tgt = &cgroupTarget{loc: locator{root: h.root, cwd: h.bundle, ns: "default", id: "abc"}}
	assert.Assert(t, tgt.prepare(), "prepare with the parent's quota")
	assert.Assert(t, tgt.open(), "the parent's quota")
	tgt.close()
	writeFile(t, filepath.Join(h.root, "sys/fs/cgroup/default/cpu.max"), "max 100000\n")
	tgt = &cgroupTarget{loc: locator{root: h.root, cwd: h.bundle, ns: "default", id: "abc"}}
	assert.Assert(t, is.ErrorIs(tgt.open(), errNoQuota), "no quota anywhere, none in the spec")
}

func readCharges(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	assert.NilError(t, err)
	return string(data)
}

func TestCgroupTarget(t *testing.T) {
	h := newFakeHost(t, mountinfoV2, "0::/\n", "/default/abc")
	cg := filepath.Join(h.root, "sys/fs/cgroup/default/abc")
	tgt := &cgroupTarget{loc: locator{root: h.root, cwd: h.bundle, ns: "default", id: "abc"}}

	assert.Assert(t, is.ErrorIs(tgt.open(), errNotYet), "before runc create")
	// A cgroup without the cpu controller.
	writeFile(t, filepath.Join(cg, "cgroup.controllers"), "memory pids\n")
	h.startInit(t, "0::/default/abc\n")
	assert.Assert(t, is.ErrorIs(tgt.open(), errNoCPU), "no cpu controller")
	// A stock kernel: the cpu controller without the file.
	writeFile(t, filepath.Join(cg, "cgroup.controllers"), "cpuset cpu io memory pids\n")
	err := tgt.open()
	assert.Assert(t, is.ErrorIs(err, errNoFile), "stock kernel")
	assert.Assert(t, is.ErrorContains(err, FileName), "stock kernel")
	writeFile(t, filepath.Join(cg, FileName), "")
	writeFile(t, filepath.Join(cg, "cpu.max"), "50000 100000\n")
	assert.NilError(t, tgt.open())
	for _, us := range []uint64{5, 1234567} {
		assert.NilError(t, tgt.charge(us))
	}
	assert.Check(t, is.Equal(readCharges(t, filepath.Join(cg, FileName)), "5\n1234567\n"), "written")
	// The cgroup is removed: the kernel fails the writes (ENODEV), which
	// a closed file stands in for here.
	tgt.f.Close()
	assert.NilError(t, os.RemoveAll(cg))
	assert.Check(t, is.ErrorIs(tgt.charge(1), errCgroupGone), "removed cgroup")
	tgt.f = nil
	tgt.close()
}

const (
	v2Stat = "usage_usec 10\nnr_borrow_periods 3\nborrowed_usec 6000\nborrow_deducted_usec 4500\nborrow_dropped_usec 0\n"
	v1Stat = "nr_periods 5\nnr_borrow_periods 3\nborrowed_time 6000000\nborrow_deducted_time 4500000\n"
)

// sameDebts compares debts, whose fields are the package's own.
var sameDebts = gocmp.AllowUnexported(debt{})

// A quota set on an ancestor after the logger started (nerdctl update of a
// pod, a --cgroup-parent limited later) paces the logger too.
func TestCgroupTargetSeesALaterParentQuota(t *testing.T) {
	h := newFakeHost(t, mountinfoV2, "0::/\n", "/default/abc")
	h.startInit(t, "0::/default/abc\n")
	cg := filepath.Join(h.root, "sys/fs/cgroup/default/abc")
	writeFile(t, filepath.Join(cg, FileName), "1234\n")
	writeFile(t, filepath.Join(cg, "cpu.max"), "50000 100000\n")
	writeFile(t, filepath.Join(cg, "cpu.stat"), v2Stat)
	parent := filepath.Dir(cg)
	writeFile(t, filepath.Join(parent, FileName), "30000\n")
	writeFile(t, filepath.Join(parent, "cpu.max"), "max 100000\n")
	writeFile(t, filepath.Join(parent, "cpu.stat"), "borrowed_usec 31000\nborrow_deducted_usec 700\n")
	tgt := &cgroupTarget{loc: locator{root: h.root, cwd: h.bundle, ns: "default", id: "abc"}}
	assert.NilError(t, tgt.open())
	defer tgt.close()
	ds, _ := tgt.debt()
	assert.Assert(t, is.Len(ds, 1), "the parent without a quota: debt() = %+v, want the container's alone", ds)
	writeFile(t, filepath.Join(parent, "cpu.max"), "20000 50000\n")
	want := []debt{{0, 1234, 4500, 6000, 50000, 100000}, {1, 30000, 700, 31000, 20000, 50000}}
	ds, ok := tgt.debt()
	assert.Check(t, ok, "the parent's quota set later")
	assert.Check(t, is.DeepEqual(ds, want, sameDebts), "the parent's quota set later")
}

// TestCgroupTargetDebt: the debt is read for the container's cgroup and
// for each ancestor with a quota (--cgroup-parent with a limit), which
// pays for the charges too.
func TestCgroupTargetDebt(t *testing.T) {
	const parentStat = "borrowed_usec 31000\nborrow_deducted_usec 700\n"
	for _, tc := range []struct {
		name          string
		files, parent map[string]string
		want          []debt
		openErr       error
	}{
		{"v2", map[string]string{"cpu.max": "50000 100000\n", "cpu.stat": v2Stat}, nil,
			[]debt{{0, 1234, 4500, 6000, 50000, 100000}}, nil},
		{"v2, quota on the parent", map[string]string{"cpu.max": "max 100000\n", "cpu.stat": v2Stat},
			map[string]string{"cpu.max": "20000 50000\n", "cpu.stat": parentStat, FileName: "30000\n"},
			[]debt{{1, 30000, 700, 31000, 20000, 50000}}, nil},
		{"v2, quota on both", map[string]string{"cpu.max": "50000 100000\n", "cpu.stat": v2Stat},
			map[string]string{"cpu.max": "20000 50000\n", "cpu.stat": parentStat, FileName: "30000\n"},
			[]debt{{0, 1234, 4500, 6000, 50000, 100000}, {1, 30000, 700, 31000, 20000, 50000}}, nil},
		{"v2, a parent without quota", map[string]string{"cpu.max": "50000 100000\n", "cpu.stat": v2Stat},
			map[string]string{"cpu.max": "max 100000\n", "cpu.stat": parentStat, FileName: "30000\n"},
			[]debt{{0, 1234, 4500, 6000, 50000, 100000}}, nil},
		{"v2 without quota", map[string]string{"cpu.max": "max 100000\n", "cpu.stat": v2Stat}, nil, nil, errNoQuota},
		{"v1", map[string]string{"cpu.cfs_quota_us": "20000\n", "cpu.cfs_period_us": "100000\n", "cpu.stat": v1Stat}, nil,
			[]debt{{0, 1234, 4500, 6000, 20000, 100000}}, nil},
		{"v1 without quota", map[string]string{"cpu.cfs_quota_us": "-1\n", "cpu.cfs_period_us": "100000\n", "cpu.stat": v1Stat}, nil, nil, errNoQuota},
		{"no limit files", map[string]string{"cpu.stat": v2Stat}, nil, nil, errNoQuota},
		{"no cpu.stat", map[string]string{"cpu.max": "50000 100000\n"}, nil, nil, nil},
	} {
		h := newFakeHost(t, mountinfoV2, "0::/\n", "/default/abc")
		h.startInit(t, "0::/default/abc\n")
		cg := filepath.Join(h.root, "sys/fs/cgroup/default/abc")
		writeFile(t, filepath.Join(cg, FileName), "1234\n")
		for name, content := range tc.files {
			writeFile(t, filepath.Join(cg, name), content)
		}
		for name, content := range tc.parent {
			writeFile(t, filepath.Join(filepath.Dir(cg), name), content)
		}
		tgt := &cgroupTarget{loc: locator{root: h.root, cwd: h.bundle, ns: "default", id: "abc"}}
		// errors.Is(err, nil) holds for a nil err only.
		if err := tgt.open(); !assert.Check(t, is.ErrorIs(err, tc.openErr), "%s: open", tc.name) || err != nil {
			continue
		}
		ds, ok := tgt.debt()
		assert.Check(t, is.Equal(ok, tc.want != nil), "%s: debt() = %+v", tc.name, ds)
		assert.Check(t, is.DeepEqual(ds, tc.want, sameDebts), tc.name)
		tgt.close()
	}
}
