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
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// FileName is the file of the cpu controller that takes the charges.
const FileName = "cpu.cfs.borrowing_us"

// taskStateDir is where containerd (rootful) keeps the bundles of the
// runtime v2 tasks: <taskStateDir>/<namespace>/<id>.
const taskStateDir = "/run/containerd/io.containerd.runtime.v2.task"

// locator finds a container's cgroup directory the way runc computes it
// from the container's OCI spec.
type locator struct {
	root   string // "/" except in tests
	cwd    string // the logging process's working directory
	ns, id string
	bundle string // the bundle, once found by its root file system's mount
}

func (l locator) path(elem ...string) string {
	return filepath.Join(append([]string{l.root}, elem...)...)
}

// bundleDir returns the container's bundle. containerd starts the shim in
// the bundle directory, and the shim starts the logging binary without
// changing directory, so the logger's working directory is the bundle: it
// is also right for a containerd with another state directory (rootless).
// When it is not (nerdctl run without -d starts the logging binary itself,
// in the user's directory; a shim shared by several containers), fall back
// to containerd's default state directory.
func (l locator) bundleDir() string {
	if l.bundle != "" {
		return l.bundle
	}
	if l.inBundle() {
		return l.cwd
	}
	return filepath.Join(taskStateDir, l.ns, l.id)
}

func (l locator) inBundle() bool {
	return l.cwd != "" && l.id != "" && filepath.Base(l.cwd) == l.id
}

// findBundle looks for the bundle of a containerd with another state
// directory (k3s's /run/k3s/containerd) when the logger does not run in
// it: the shim mounts the container's root file system at <bundle>/rootfs
// in the host's mount namespace, which no container can add mounts to,
// before it creates the task. Until then it finds nothing.
func (l *locator) findBundle() {
	if l.bundle != "" || l.inBundle() || exists(l.path(taskStateDir, l.ns, l.id, "config.json")) {
		return
	}
	suffix := "/" + filepath.Base(taskStateDir) + "/" + l.ns + "/" + l.id + "/rootfs"
	if point := mountPointWithSuffix(l.path("/proc/self/mountinfo"), suffix); point != "" {
		l.bundle = filepath.Dir(point)
	}
}

// cgroupDir returns the container's cgroup directory (under root), which
// may not exist yet, and whether it is the cgroup of the container's init
// process (else it is worked out from the spec).
func (l locator) cgroupDir() (string, bool, error) {
	b, err := readBundle(l.path(l.bundleDir()))
	if err != nil {
		return "", false, err
	}
	mnt, err := readMountinfo(l.path("/proc/self/mountinfo"))
	if err != nil {
		return "", false, err
	}
	if dir, err := l.initCgroupDir(mnt); err == nil {
		return dir, true, nil
	}
	dir, err := l.specCgroupDir(b, mnt)
	return dir, false, err
}

// initCgroupDir returns the cgroup of the container's init process, whose
// PID the shim writes to the bundle's init.pid once the runtime has created
// the container. It is where the runtime put the container, whatever its
// rules: crun's systemd driver, for one, puts the processes and the limits
// in a "container" child of the scope that cgroupsPath names.
func (l locator) initCgroupDir(mnt mount) (string, error) {
	data, err := os.ReadFile(l.path(l.bundleDir(), "init.pid"))
	if err != nil {
		return "", err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return "", fmt.Errorf("init.pid: bad PID %q", data)
	}
	rel, err := readProcCgroup(l.path("/proc", strconv.Itoa(pid), "cgroup"), mnt.v1)
	if err != nil {
		return "", err
	}
	// /proc shows the path from the hierarchy's root, the mount may show
	// a subtree of it.
	if r, err := filepath.Rel(mnt.root, rel); err == nil && !strings.HasPrefix(r, "..") {
		rel = r
	}
	return l.path(mnt.point, rel), nil
}

// specCgroupDir returns the cgroup runc makes from the spec's cgroupsPath.
func (l locator) specCgroupDir(b bundle, mnt mount) (string, error) {
	self := func() (string, error) { return readProcCgroup(l.path("/proc/self/cgroup"), mnt.v1) }
	init := func() (string, error) { return readProcCgroup(l.path("/proc/1/cgroup"), mnt.v1) }
	rel, err := cgroupPath(b, l.id, mnt, self, init)
	if err != nil {
		return "", fmt.Errorf("%w: %v", errBadCgroupPath, err)
	}
	return l.path(mnt.point, rel), nil
}

// bundle is what the charger needs from a bundle.
type bundle struct {
	cgroupsPath string // linux.cgroupsPath of config.json
	systemd     bool   // runc uses its systemd cgroup driver
	quota       int64  // linux.resources.cpu.quota (µs per period; 0 or -1: none)
}

// readBundle reads the bundle's config.json and, to learn which cgroup
// driver runc is told to use, the runc shim's options.json (written before
// the logger starts). Without options.json the systemd driver is assumed
// when cgroupsPath has the systemd form "slice:prefix:name".
func readBundle(dir string) (bundle, error) {
	data, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return bundle{}, fmt.Errorf("%w (no %s)", errNotYet, filepath.Join(dir, "config.json"))
	} else if err != nil {
		return bundle{}, err
	}
	var spec struct {
		Linux *struct {
			CgroupsPath string `json:"cgroupsPath"`
			Resources   *struct {
				CPU *struct {
					Quota *int64 `json:"quota"`
				} `json:"cpu"`
			} `json:"resources"`
		} `json:"linux"`
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		return bundle{}, fmt.Errorf("%s: %w", filepath.Join(dir, "config.json"), err)
	}
	var b bundle
	if spec.Linux != nil {
		b.cgroupsPath = spec.Linux.CgroupsPath
		if r := spec.Linux.Resources; r != nil && r.CPU != nil && r.CPU.Quota != nil {
			b.quota = *r.CPU.Quota
		}
	}
	b.systemd = strings.Count(b.cgroupsPath, ":") == 2 && !strings.Contains(b.cgroupsPath, "/")
	if data, err := os.ReadFile(filepath.Join(dir, "options.json")); err == nil {
		// encoding/json of the runc options (containerd 1.x), or
		// protojson (camel case).
		var o struct {
			Snake *bool `json:"systemd_cgroup"`
			Camel *bool `json:"systemdCgroup"`
		}
		if json.Unmarshal(data, &o) == nil {
			switch {
			case o.Snake != nil:
				b.systemd = *o.Snake
			case o.Camel != nil:
				b.systemd = *o.Camel
			default:
				b.systemd = false // omitempty: false
			}
		}
	}
	return b, nil
}

// mount is the cgroup hierarchy that has the cpu controller.
type mount struct {
	point string // mount point
	root  string // the hierarchy's directory mounted there
	v1    bool
}

// cgroupPath returns the container's cgroup relative to the mount point,
// as runc (1.1) computes it from linux.cgroupsPath:
//   - systemd driver, "slice:prefix:name": <slice, expanded>/<prefix>-<name>.scope
//     (or <name> when it is a slice), under system.slice when the slice is
//     empty and, on cgroup v1, under the cgroup of PID 1 without init.scope;
//   - cgroupfs driver: the path itself when absolute; a relative path is
//     relative to the cgroup of runc, which is the shim's (its parent), so
//     this process's when the shim started it: on v2 to its parent
//     directory, as runc does.
//
// self and init return the cgroups of this process and of PID 1.
func cgroupPath(b bundle, id string, m mount, self, init func() (string, error)) (string, error) {
	if b.systemd {
		slice, prefix, name := "", "runc", id
		if b.cgroupsPath != "" {
			parts := strings.Split(b.cgroupsPath, ":")
			if len(parts) != 3 {
				return "", fmt.Errorf("cgroupsPath %q is not \"slice:prefix:name\" (systemd cgroup driver)", b.cgroupsPath)
			}
			slice, prefix, name = parts[0], parts[1], parts[2]
		}
		sliceDir := "/system.slice"
		if slice != "" {
			var err error
			if sliceDir, err = expandSlice(slice); err != nil {
				return "", err
			}
		}
		unit := name
		if !strings.HasSuffix(name, ".slice") {
			unit = prefix + "-" + name + ".scope"
		}
		if !m.v1 {
			return filepath.Join("/", sliceDir, unit), nil
		}
		initPath, err := init()
		if err != nil {
			return "", err
		}
		initPath = strings.TrimSuffix(filepath.Clean(initPath), "init.scope")
		return filepath.Join("/", initPath, sliceDir, unit), nil
	}

	inner := cleanPath(b.cgroupsPath)
	if inner == "" {
		inner = id // runc: Name is the container ID, Path is empty
	}
	if filepath.IsAbs(inner) {
		return inner, nil
	}
	own, err := self()
	if err != nil {
		return "", fmt.Errorf("relative cgroupsPath %q: %w", b.cgroupsPath, err)
	}
	if !m.v1 {
		return filepath.Join("/", filepath.Dir(own), inner), nil
	}
	// runc makes its own cgroup relative to the mounted directory.
	if rel, err := filepath.Rel(m.root, own); err == nil && !strings.HasPrefix(rel, "..") {
		own = rel
	}
	return filepath.Join("/", own, inner), nil
}

// expandSlice turns a systemd slice name into its path: "a-b-c.slice" is
// "/a.slice/a-b.slice/a-b-c.slice", "-.slice" the root (runc's rules).
func expandSlice(slice string) (string, error) {
	const suffix = ".slice"
	if len(slice) < len(suffix) || !strings.HasSuffix(slice, suffix) || strings.Contains(slice, "/") {
		return "", fmt.Errorf("invalid slice name %q", slice)
	}
	name := strings.TrimSuffix(slice, suffix)
	if name == "-" {
		return "/", nil
	}
	var path, prefix string
	for _, component := range strings.Split(name, "-") {
		if component == "" {
			return "", fmt.Errorf("invalid slice name %q", slice)
		}
		path += "/" + prefix + component + suffix
		prefix += component + "-"
	}
	return path, nil
}

// cleanPath is runc's CleanPath: a relative path cannot climb out with "..".
func cleanPath(p string) string {
	if p == "" {
		return ""
	}
	p = filepath.Clean(p)
	if !filepath.IsAbs(p) {
		p = filepath.Clean(string(os.PathSeparator) + p)
		p, _ = filepath.Rel(string(os.PathSeparator), p)
	}
	return filepath.Clean(p)
}

// maxSpecWaits is how many attempts wait for the bundle's init.pid before
// the cgroup is taken from the spec alone (10 ms apart).
const maxSpecWaits = 200

// cgroupTarget writes charges to the container's cpu.cfs.borrowing_us.
type cgroupTarget struct {
	loc locator
	// Worked out by prepare, when the logging process starts: the
	// hierarchy and the cgroup that the spec names, so that a container
	// whose init process has already exited is still found.
	mnt     mount
	specDir string
	// specQuota: the spec sets a CPU quota, so that a cgroup found
	// without one is still being set up by the runtime.
	specQuota bool
	dir       string // the container's cgroup directory, once found
	// specWaits counts the attempts made while the bundle has no init.pid.
	specWaits int
	f         *os.File // open read-write: one write(2) per charge
	buf       []byte
	// levels are the container's cgroup and its ancestors with a quota:
	// what the kernel says each still owes paces the logger.
	levels []*level
	rbuf   []byte
}

// level is one cgroup whose debt is read back, its files kept open (one
// pread(2) each per reading).
type level struct {
	dir    string
	borrow *os.File // cpu.cfs.borrowing_us
	stat   *os.File // cpu.stat
	max    *os.File // v2: cpu.max; v1: cpu.cfs_quota_us
	period *os.File // v1: cpu.cfs_period_us
}

var errNoQuota = errors.New("no CPU quota on the container's cgroup or its ancestors: nothing to charge")

// prepare decides, when the logging process starts, whether charging can
// work at all, so that it costs nothing where it cannot: the kernel has the
// file, and a CPU quota applies (the container's own, from the spec, or one
// of an existing ancestor's). It also records the container's cgroup as the
// spec names it. An error means: do not charge. Whether this process may
// charge is the kernel's to say, at the first write: the rule is that of a
// move into the container's cgroup (cgroup v2's delegation rule, which a
// rootless logger in the user's own subtree meets; v1: CAP_SYS_ADMIN).
func (t *cgroupTarget) prepare() error {
	b, err := t.locate()
	if err != nil {
		return err
	}
	top := t.loc.path(t.mnt.point)
	// The nearest existing ancestor with the cpu controller's files tells
	// whether the kernel has cpu.cfs.borrowing_us (the root has none),
	// else this process's own cgroup does; with neither made yet, open
	// finds out.
	t.specQuota = b.quota > 0
	dirs := ancestors(t.specDir, top)
	if rel, err := readProcCgroup(t.loc.path("/proc/self/cgroup"), t.mnt.v1); err == nil {
		if r, err := filepath.Rel(t.mnt.root, rel); err == nil && !strings.HasPrefix(r, "..") {
			rel = r
		}
		if self := filepath.Join(top, rel); self != top {
			dirs = append(dirs, self)
		}
	}
	for _, dir := range dirs {
		if !exists(filepath.Join(dir, "cpu.max")) && !exists(filepath.Join(dir, "cpu.cfs_quota_us")) {
			continue
		}
		if !exists(filepath.Join(dir, FileName)) {
			return fmt.Errorf("%w (not in %s)", errNoFile, dir)
		}
		break
	}
	if b.quota > 0 {
		return nil
	}
	for _, dir := range ancestors(t.specDir, top) {
		if q, _, ok := readLimit(dir); ok && q > 0 {
			return nil
		}
	}
	return errNoQuota
}

// locate reads the bundle and the mounts, and records the cgroup that the
// spec names.
func (t *cgroupTarget) locate() (bundle, error) {
	t.loc.findBundle()
	b, err := readBundle(t.loc.path(t.loc.bundleDir()))
	if err != nil {
		return b, err
	}
	if t.mnt, err = readMountinfo(t.loc.path("/proc/self/mountinfo")); err != nil {
		return b, err
	}
	t.specDir, err = t.loc.specCgroupDir(b, t.mnt)
	return b, err
}

// ancestors returns the parents of dir up to top (excluded), nearest first.
func ancestors(dir, top string) []string {
	var out []string
	for d := filepath.Dir(dir); d != top && strings.HasPrefix(d, top) && d != filepath.Dir(d); d = filepath.Dir(d) {
		out = append(out, d)
	}
	return out
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// readLimit reads a cgroup's quota and period in µs (v2 cpu.max, v1
// cpu.cfs_quota_us and cpu.cfs_period_us); quota 0 without one.
// containerd's cgroups package has no reader for them: cgroup2's CPUMax
// is what its Manager writes, and neither cgroup1's nor cgroup2's Stat
// reads a limit back.
func readLimit(dir string) (quota, period uint64, ok bool) {
	if data, err := os.ReadFile(filepath.Join(dir, "cpu.max")); err == nil {
		return parseMax(data)
	}
	q, errQ := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us"))
	p, errP := os.ReadFile(filepath.Join(dir, "cpu.cfs_period_us"))
	if errQ != nil || errP != nil {
		return 0, 0, false
	}
	return parseV1Limit(q, p)
}

// parseMax parses v2's cpu.max, "QUOTA PERIOD" or "max PERIOD".
func parseMax(data []byte) (quota, period uint64, ok bool) {
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return 0, 0, false
	}
	period, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	if f[0] == "max" {
		return 0, period, true
	}
	quota, err = strconv.ParseUint(f[0], 10, 64)
	return quota, period, err == nil
}

// parseV1Limit parses v1's cpu.cfs_quota_us (-1: no quota) and
// cpu.cfs_period_us.
func parseV1Limit(q, p []byte) (quota, period uint64, ok bool) {
	period, err := strconv.ParseUint(strings.TrimSpace(string(p)), 10, 64)
	if err != nil {
		return 0, 0, false
	}
	qs := strings.TrimSpace(string(q))
	if strings.HasPrefix(qs, "-") {
		return 0, period, true
	}
	quota, err = strconv.ParseUint(qs, 10, 64)
	return quota, period, err == nil
}

// findDir returns the container's cgroup: its init process's (where the
// runtime really put it, see initCgroupDir), else the spec's. fromInit
// tells that the shim has reported the init process, so that the cgroup
// exists unless the container is gone.
func (t *cgroupTarget) findDir() (dir string, fromInit bool, err error) {
	if t.specDir == "" {
		if _, err := t.locate(); err != nil {
			return "", false, err
		}
	}
	_, err = os.ReadFile(t.loc.path(t.loc.bundleDir(), "init.pid"))
	switch {
	case err == nil:
		if dir, err := t.loc.initCgroupDir(t.mnt); err == nil {
			return dir, true, nil
		}
		// The init process has exited already (a short-lived
		// container, or PID garbage): the spec's cgroup, which the
		// runtime removes only when the task is deleted.
		return t.specDir, true, nil
	case t.specWaits < maxSpecWaits:
		// The spec's cgroup may exist before the init process is in the
		// cgroup the runtime really uses (a child of it, with crun):
		// rely on the spec alone only for a runtime that never reports
		// the init process.
		t.specWaits++
		return "", false, fmt.Errorf("%w (no init.pid in the bundle yet)", errNotYet)
	}
	return t.specDir, false, nil
}

func (t *cgroupTarget) open() error {
	fromInit := true
	if t.dir == "" {
		dir, fi, err := t.findDir()
		if err != nil {
			return err
		}
		t.dir, fromInit = dir, fi
	}
	err := t.openDir(fromInit)
	// The runtime sets the cgroup up after making it (the systemd
	// driver's scope exists before the cpu controller is enabled for it
	// and before its quota is applied): a cgroup taken from the spec
	// before the init process is reported, or one without the quota the
	// spec sets, is not ready yet, not a reason to stop for the
	// container's life. (The charger gives up, with a warning, after
	// resolveTimeout.)
	if (errors.Is(err, errNoCPU) || errors.Is(err, errNoQuota)) && (!fromInit || t.specQuota) {
		t.dir = ""
		return fmt.Errorf("%w (%v)", errNotYet, err)
	}
	return err
}

// openDir opens the files of t.dir; fromInit tells that the init process
// was seen in it.
func (t *cgroupTarget) openDir(fromInit bool) error {
	// Cheap: one stat(2) per tick until runc has created the cgroup.
	if _, err := os.Stat(t.dir); errors.Is(err, fs.ErrNotExist) {
		if fromInit {
			// The runtime had made it: the task is deleted already.
			return fmt.Errorf("%w (%s)", errCgroupGone, t.dir)
		}
		err := fmt.Errorf("%w (%s)", errNotYet, t.dir)
		t.dir = ""
		return err
	} else if err != nil {
		return err
	}
	path := filepath.Join(t.dir, FileName)
	// Read-write: the charger reads the outstanding debt back to pace the
	// logger.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(t.dir); serr != nil {
			return fmt.Errorf("%w (%s)", errCgroupGone, t.dir)
		}
		// On cgroup v2 the cpu files are there only when the parent
		// enables the controller for its children.
		if listed, ok := cpuControllerListed(t.loc.path(t.mnt.point), t.dir); ok && !listed {
			return fmt.Errorf("%w (%s)", errNoCPU, t.dir)
		}
		return fmt.Errorf("%w: %s does not exist", errNoFile, path)
	} else if err != nil {
		return err
	}
	t.f = f
	if err := t.openLevels(); err != nil {
		t.close()
		return err
	}
	return nil
}

// openLevels opens the files of the container's cgroup and of each ancestor
// with the cpu controller's files: the kernel takes a charge from every
// one with a quota (v2 semantics; the old kernel from the nearest with a
// quota), so any of them may be the one that owes more than it can pay,
// and one limited later (a pod updated) is read from then on. None with
// a quota now: the kernel would drop every charge.
func (t *cgroupTarget) openLevels() error {
	top := t.loc.path(t.mnt.point)
	limited := false
	for i, dir := range append([]string{t.dir}, ancestors(t.dir, top)...) {
		q, _, ok := readLimit(dir)
		if i > 0 && !ok {
			continue
		}
		limited = limited || q > 0
		l := &level{dir: dir}
		if i == 0 {
			l.borrow = t.f
		} else if l.borrow, _ = os.Open(filepath.Join(dir, FileName)); l.borrow == nil {
			continue
		}
		l.stat, _ = os.Open(filepath.Join(dir, "cpu.stat"))
		if l.max, _ = os.Open(filepath.Join(dir, "cpu.max")); l.max == nil {
			l.max, _ = os.Open(filepath.Join(dir, "cpu.cfs_quota_us"))
			l.period, _ = os.Open(filepath.Join(dir, "cpu.cfs_period_us"))
		}
		t.levels = append(t.levels, l)
	}
	if !limited {
		return fmt.Errorf("%w (%s)", errNoQuota, t.dir)
	}
	return nil
}

func (t *cgroupTarget) charge(us uint64) error {
	// A decimal number and a newline, as echo writes it.
	t.buf = append(strconv.AppendUint(t.buf[:0], us, 10), '\n')
	_, err := t.f.Write(t.buf)
	if err == nil {
		return nil
	}
	// The kernel fails writes to a removed cgroup's files with ENODEV.
	if _, serr := os.Stat(t.dir); errors.Is(err, syscall.ENODEV) || errors.Is(serr, fs.ErrNotExist) {
		return fmt.Errorf("%w (%s)", errCgroupGone, t.dir)
	}
	return err
}

// pread reads a small file from its start.
func (t *cgroupTarget) pread(f *os.File) ([]byte, bool) {
	if f == nil {
		return nil, false
	}
	if t.rbuf == nil {
		t.rbuf = make([]byte, 4096)
	}
	n, err := f.ReadAt(t.rbuf, 0)
	if n == 0 && err != nil {
		return nil, false
	}
	return t.rbuf[:n], true
}

// debt reads, for the container's cgroup and each ancestor with a quota,
// the outstanding borrowing (cpu.cfs.borrowing_us), what the kernel
// deducted so far (cpu.stat: borrow_deducted_usec on v2,
// borrow_deducted_time in ns on v1) and the bandwidth limit (read anew each
// time: nerdctl update can change it). ok is false when no level could be
// read with a quota. The files are parsed here, not by containerd's cgroups
// package: its Stat methods open every file anew and keep only their fixed
// set of cpu.stat keys, not the borrow_* ones of the kernel series, and
// this runs at every tick on files kept open.
func (t *cgroupTarget) debt() (ds []debt, ok bool) {
	for i, l := range t.levels {
		d := debt{level: i}
		data, good := t.pread(l.borrow)
		if !good {
			continue
		}
		var err error
		if d.outstanding, err = strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64); err != nil {
			continue
		}
		if data, good = t.pread(l.stat); !good {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			key, value, _ := strings.Cut(line, " ")
			switch key {
			case "borrow_deducted_usec":
				d.deducted, _ = strconv.ParseUint(value, 10, 64)
			case "borrow_deducted_time":
				d.deducted, _ = strconv.ParseUint(value, 10, 64)
				d.deducted /= 1000
			case "borrowed_usec":
				d.borrowed, _ = strconv.ParseUint(value, 10, 64)
			case "borrowed_time":
				d.borrowed, _ = strconv.ParseUint(value, 10, 64)
				d.borrowed /= 1000
			}
		}
		q, good := t.pread(l.max)
		if !good {
			continue
		}
		if l.period == nil {
			d.quota, d.period, good = parseMax(q)
		} else {
			q = append([]byte(nil), q...)
			var p []byte
			if p, good = t.pread(l.period); good {
				d.quota, d.period, good = parseV1Limit(q, p)
			}
		}
		if !good || d.quota == 0 {
			continue
		}
		ds = append(ds, d)
	}
	return ds, len(ds) > 0
}

func (t *cgroupTarget) close() {
	for _, l := range t.levels {
		for _, f := range []*os.File{l.stat, l.max, l.period} {
			if f != nil {
				f.Close()
			}
		}
		if l.borrow != t.f {
			l.borrow.Close()
		}
	}
	t.levels = nil
	if t.f != nil {
		t.f.Close()
		t.f = nil
	}
}
