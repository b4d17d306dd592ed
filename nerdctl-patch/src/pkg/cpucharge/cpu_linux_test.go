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
	if used := p.cpuTime() - before; used < 20*ms {
		t.Errorf("the process clock grew by %v during 20ms of busy loop", used)
	}
}

func TestThreadCPUClockID(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	spin(ms)
	a := clockTime(unix.CLOCK_THREAD_CPUTIME_ID)
	b := clockTime(threadCPUClock(unix.Gettid()))
	c := clockTime(unix.CLOCK_THREAD_CPUTIME_ID)
	if a == 0 || b < a || b > c {
		t.Errorf("clock of this thread by tid = %v, want between %v and %v", b, a, c)
	}
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
	if got := tc.cpuTime(); got < 30*ms || got > 200*ms {
		t.Errorf("tracked thread: %v, want about 30ms", got)
	}
	// Work on untracked threads is not counted.
	before := tc.cpuTime()
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); spin(20 * ms) }()
	}
	wg.Wait()
	if got := tc.cpuTime() - before; got > 5*ms {
		t.Errorf("untracked work counted: %v", got)
	}
	close(release)
	<-finished
	// The final sample of the untracked thread is kept.
	got := tc.cpuTime()
	if got < 40*ms {
		t.Errorf("after untrack: %v, want at least 40ms", got)
	}
	if len(tc.threads) != 0 {
		t.Errorf("%d threads still tracked", len(tc.threads))
	}
	spin(10 * ms)
	if again := tc.cpuTime(); again != got {
		t.Errorf("grew from %v to %v with nothing tracked", got, again)
	}
}

// sumCharges adds up the charges written to a fake cpu.cfs.borrowing_us.
func sumCharges(t testing.TB, path string) (sum uint64) {
	t.Helper()
	for _, line := range strings.Fields(readCharges(t, path)) {
		n, err := strconv.ParseUint(line, 10, 64)
		if err != nil {
			t.Fatalf("bad charge %q", line)
		}
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
	if got := time.Duration(sumCharges(t, file)) * time.Microsecond; got < used-time.Microsecond || got < 30*ms {
		t.Errorf("charged %v, used %v", got, used)
	}
	if n := strings.Count(readCharges(t, file), "\n"); n < 2 {
		t.Errorf("%d writes: want several ticks and the final flush", n)
	}
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
	if got := time.Duration(sumCharges(t, file)) * time.Microsecond; got < 40*ms || got > 70*ms {
		t.Errorf("charged %v, want the 40ms of the two tracked threads", got)
	}
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
				if c.stop != nil {
					t.Errorf("%v: the charger runs", mode)
				}
				c.Pace()
				c.WaitQueue(func() int { return 10000 }) // returns at once
				c.Stop()
			}
			if w.count() != 0 || d.count() != 2 {
				t.Errorf("warnings %q, debug messages %q; want none and one per start", w.msgs, d.msgs)
			}
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
			if c.stop == nil {
				t.Fatal("the charger does not run")
			}
			spin(20 * ms)
			c.Stop()
			if sumCharges(t, file) == 0 {
				t.Error("nothing charged")
			}
		})
	}
}

// TestStartStockKernelLate: a kernel without the file that only the
// container's own cgroup shows (no ancestor has the cpu files yet): the
// charger stops at its first look, with one debug message.
func TestStartStockKernelLate(t *testing.T) {
	o, file := fakeContainer(t)
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	var w, d warnings
	o.Warnf, o.Debugf = w.warnf, d.warnf
	c := Start(o)
	select {
	case <-c.done: // stopped by itself
	case <-time.After(5 * time.Second):
		t.Fatal("still charging on a kernel without the file")
	}
	c.Stop()
	if w.count() != 0 || d.count() != 1 || !strings.Contains(d.msgs[0], FileName) {
		t.Errorf("warnings %q, debug messages %q; want one debug message about %s", w.msgs, d.msgs, FileName)
	}
}

// TestShortLivedContainer: the container's init process has exited by the
// time the charger first looks (its cgroup is there until the task is
// deleted): the cgroup recorded from the spec at start is charged, at once.
func TestShortLivedContainer(t *testing.T) {
	o, file := fakeContainer(t)
	// init.pid names a process that is gone.
	if err := os.RemoveAll(filepath.Join(o.Root, "proc/77")); err != nil {
		t.Fatal(err)
	}
	var w, d warnings
	o.Warnf, o.Debugf, o.Mode = w.warnf, d.warnf, ModeProcess
	c := Start(o)
	spin(5 * ms)
	time.Sleep(50 * ms)
	c.Stop()
	if got := sumCharges(t, file); got < 5000 {
		t.Errorf("charged %d µs, want at least the 5 ms used", got)
	}
	if w.count() != 0 || d.count() != 0 {
		t.Errorf("warnings %q, debug %q", w.msgs, d.msgs)
	}
}
