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
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// spin burns d of the calling thread's CPU time (not wall time, so that
// the assertions hold on a loaded machine).
func spin(d time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := clockTime(unix.CLOCK_THREAD_CPUTIME_ID)
	for clockTime(unix.CLOCK_THREAD_CPUTIME_ID)-start < d {
	}
}

func TestProcessClock(t *testing.T) {
	var p processClock
	before := p.cpuTime()
	spin(20 * ms)
	used := p.cpuTime() - before
	assert.Check(t, used >= 20*ms, "the process clock grew by %v during 20ms of busy loop", used)
}

func TestThreadCPUClockID(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	spin(ms)
	a := clockTime(unix.CLOCK_THREAD_CPUTIME_ID)
	b := clockTime(threadCPUClock(unix.Gettid()))
	c := clockTime(unix.CLOCK_THREAD_CPUTIME_ID)
	assert.Check(t, a != 0, "the thread's own clock")
	assert.Check(t, a <= b && b <= c, "clock of this thread by tid = %v, want between %v and %v", b, a, c)
}

func TestThreadClock(t *testing.T) {
	tc := newThreadClock()
	spun, release, finished := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		defer tc.track()()
		spin(30 * ms)
		close(spun)
		<-release
		spin(10 * ms) // after the last sample: only the final sample sees it
	}()
	<-spun
	// Sampled from another thread, by the tracked thread's ID.
	got := tc.cpuTime()
	assert.Check(t, 30*ms <= got && got <= 200*ms, "tracked thread: %v, want about 30ms", got)
	// Work on untracked threads is not counted.
	before := tc.cpuTime()
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); spin(20 * ms) }()
	}
	wg.Wait()
	untracked := tc.cpuTime() - before
	assert.Check(t, untracked <= 5*ms, "untracked work counted: %v", untracked)
	close(release)
	<-finished
	// The final sample of the untracked thread is kept.
	got = tc.cpuTime()
	assert.Check(t, got >= 40*ms, "after untrack: %v, want at least 40ms", got)
	assert.Check(t, is.Len(tc.threads, 0), "threads still tracked")
	spin(10 * ms)
	assert.Check(t, is.Equal(tc.cpuTime(), got), "grew with nothing tracked")
}

// sumCharges adds up the charges written to a fake cpu.cfs.borrowing_us.
func sumCharges(t testing.TB, path string) (sum uint64) {
	t.Helper()
	for _, line := range strings.Fields(readCharges(t, path)) {
		n, err := strconv.ParseUint(line, 10, 64)
		assert.NilError(t, err, "bad charge %q", line)
		sum += n
	}
	return sum
}

// fakeContainer is a fake host in which runc has created the container's
// cgroup on a kernel with the borrowing file.
func fakeContainer(t testing.TB) (Options, string) {
	h := newFakeHost(t, mountinfoV2, "0::/system.slice/containerd.service\n", "/default/abc")
	file := filepath.Join(h.root, "sys/fs/cgroup/default/abc", FileName)
	writeFile(t, file, "")
	writeFile(t, filepath.Join(h.root, "sys/fs/cgroup/default/abc/cpu.max"), "50000 100000\n")
	h.startInit(t, "0::/default/abc\n")
	return Options{ContainerID: "abc", Namespace: "default", Root: h.root, Cwd: h.bundle, Warnf: t.Errorf}, file
}

func TestStartProcess(t *testing.T) {
	o, file := fakeContainer(t)
	var p processClock
	before := p.cpuTime()
	o.Mode = ModeProcess
	c := Start(o)
	spin(30 * ms)
	time.Sleep(30 * ms) // some ticks happen
	c.Stop()
	used := p.cpuTime() - before
	// All the process's CPU time since it started is charged, so at
	// least what was used since before Start.
	got := time.Duration(sumCharges(t, file)) * time.Microsecond
	assert.Check(t, got >= used-time.Microsecond && got >= 30*ms, "charged %v, used %v", got, used)
	n := strings.Count(readCharges(t, file), "\n")
	assert.Check(t, n >= 2, "%d writes: want several ticks and the final flush", n)
}

func TestStartThread(t *testing.T) {
	o, file := fakeContainer(t)
	o.Mode = ModeThread
	c := Start(o)
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.TrackThread()()
			spin(20 * ms)
		}()
	}
	spin(50 * ms) // not tracked
	wg.Wait()
	c.Stop()
	got := time.Duration(sumCharges(t, file)) * time.Microsecond
	assert.Check(t, 40*ms <= got && got <= 70*ms, "charged %v, want the 40ms of the two tracked threads", got)
}

// TestStartCannotCharge: where charging cannot work, Start finds out at
// once and costs nothing: no goroutine, the readers' full queues, one debug
// message and no warning.
func TestStartCannotCharge(t *testing.T) {
	cg := "sys/fs/cgroup/default/abc"
	for name, setup := range map[string]func(t *testing.T, root, file string){
		"stock kernel": func(t *testing.T, root, file string) {
			os.Remove(file)
			// The parent has the cpu controller's files, not the new one.
			writeFile(t, filepath.Join(root, "sys/fs/cgroup/default/cpu.max"), "max 100000\n")
		},
		"stock kernel, seen in the logger's cgroup": func(t *testing.T, root, file string) {
			os.Remove(file)
			writeFile(t, filepath.Join(root, "sys/fs/cgroup/system.slice/containerd.service/cpu.max"), "max 100000\n")
		},
		"no quota on the path": func(t *testing.T, root, file string) {
			writeFile(t, filepath.Join(root, taskStateDir, "default/abc/config.json"), `{"linux":{"cgroupsPath":"/default/abc"}}`)
			writeFile(t, filepath.Join(root, "sys/fs/cgroup/default/cpu.max"), "max 100000\n")
			writeFile(t, filepath.Join(root, cg, "cpu.max"), "max 100000\n")
		},
	} {
		t.Run(name, func(t *testing.T) {
			o, file := fakeContainer(t)
			setup(t, o.Root, file)
			var w, d warnings
			o.Warnf, o.Debugf = w.warnf, d.warnf
			for _, mode := range []Mode{ModeProcess, ModeThread} {
				o.Mode = mode
				c := Start(o)
				assert.Check(t, c.stop == nil, "%v: the charger runs", mode)
				c.Pace()
				in := make(chan string, relayBatch)
				for len(in) < relayBatch {
					in <- "line"
				}
				c.WaitQueue(in) // returns at once
				c.Stop()
			}
			assert.Check(t, is.Equal(w.count(), 0), "warnings %q; want none", w.msgs)
			assert.Check(t, is.Equal(d.count(), 2), "debug messages %q; want one per start", d.msgs)
		})
	}
}

// TestStartLeavesPermissionToTheKernel: a logging process without
// CAP_SYS_ADMIN, or in a user namespace (rootless), may still charge: the
// kernel allows what the process could do by moving itself into the
// container's cgroup (a delegated subtree of its user's), so the charger
// starts and charges; a refusal is handled at the write (TestStopsOnce).
func TestStartLeavesPermissionToTheKernel(t *testing.T) {
	for name, setup := range map[string]func(root string){
		"no CAP_SYS_ADMIN": func(root string) {
			writeFile(t, filepath.Join(root, "proc/self/status"), "CapEff:\t0000000000000000\n")
		},
		"rootless (a user namespace)": func(root string) {
			writeFile(t, filepath.Join(root, "proc/self/uid_map"), "0 1000 1\n1 100000 65536\n")
		},
	} {
		t.Run(name, func(t *testing.T) {
			o, file := fakeContainer(t)
			setup(o.Root)
			o.Mode = ModeProcess
			c := Start(o)
			assert.Assert(t, c.stop != nil, "the charger does not run")
			spin(20 * ms)
			c.Stop()
			assert.Check(t, sumCharges(t, file) != 0, "nothing charged")
		})
	}
}

// TestStartStockKernelLate: a kernel without the file that only the
// container's own cgroup shows (no ancestor has the cpu files yet): the
// charger stops at its first look, with one debug message.
func TestStartStockKernelLate(t *testing.T) {
	o, file := fakeContainer(t)
	assert.NilError(t, os.Remove(file))
	var w, d warnings
	o.Warnf, o.Debugf = w.warnf, d.warnf
	c := Start(o)
	assert.Assert(t, closedWithin(c.done, 5*time.Second), "still charging on a kernel without the file") // stopped by itself
	c.Stop()
	assert.Check(t, is.Equal(w.count(), 0), "warnings %q; want none", w.msgs)
	if assert.Check(t, is.Equal(d.count(), 1), "debug messages %q; want one", d.msgs) {
		assert.Check(t, is.Contains(d.msgs[0], FileName), "the debug message")
	}
}

// TestShortLivedContainer: the container's init process has exited by the
// time the charger first looks (its cgroup is there until the task is
// deleted): the cgroup recorded from the spec at start is charged, at once.
func TestShortLivedContainer(t *testing.T) {
	o, file := fakeContainer(t)
	// init.pid names a process that is gone.
	assert.NilError(t, os.RemoveAll(filepath.Join(o.Root, "proc/77")))
	var w, d warnings
	o.Warnf, o.Debugf, o.Mode = w.warnf, d.warnf, ModeProcess
	c := Start(o)
	spin(5 * ms)
	time.Sleep(50 * ms)
	c.Stop()
	got := sumCharges(t, file)
	assert.Check(t, got >= 5000, "charged %d µs, want at least the 5 ms used", got)
	assert.Check(t, is.Equal(w.count(), 0), "warnings %q", w.msgs)
	assert.Check(t, is.Equal(d.count(), 0), "debug %q", d.msgs)
}
