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
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// newCPUSource returns the CPU clock of a mode, and the thread registry in
// thread mode; nil for ModeOff.
func newCPUSource(m Mode) (cpuSource, threadTracker) {
	switch m {
	case ModeProcess:
		return processClock{}, nil
	case ModeThread:
		t := newThreadClock()
		return t, t
	}
	return nil, nil
}

// processClock is the CPU time of all the threads of this process, in
// nanoseconds (the tick-based times of /proc/self/stat are too coarse to
// charge every 10 ms).
type processClock struct{}

func (processClock) cpuTime() time.Duration {
	return clockTime(unix.CLOCK_PROCESS_CPUTIME_ID)
}

// clockTime reads a CPU clock; 0 when it cannot, which the charger takes as
// "no progress".
func clockTime(id int32) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(id, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// threadCPUClock is the clock ID of another thread's CPU time:
// MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) of the kernel, valid for the
// threads of the calling process.
func threadCPUClock(tid int) int32 {
	return int32(^tid<<3 | 6)
}

// threadClock is the CPU time of the tracked threads since they were
// tracked, plus the final CPU time of those no longer tracked.
type threadClock struct {
	mu      sync.Mutex
	threads map[*trackedThread]struct{}
	done    time.Duration
}

type trackedThread struct {
	tid  int
	base time.Duration // the thread's CPU time when tracked: an OS thread may have run other goroutines before
	last time.Duration // the latest sample, since base
}

func newThreadClock() *threadClock {
	return &threadClock{threads: map[*trackedThread]struct{}{}}
}

func (c *threadClock) track() func() {
	// The goroutine must stay on this thread for the thread's clock to be
	// its CPU time.
	runtime.LockOSThread()
	t := &trackedThread{tid: unix.Gettid(), base: clockTime(unix.CLOCK_THREAD_CPUTIME_ID)}
	c.mu.Lock()
	c.threads[t] = struct{}{}
	c.mu.Unlock()
	return func() {
		final := clockTime(unix.CLOCK_THREAD_CPUTIME_ID) - t.base
		c.mu.Lock()
		delete(c.threads, t)
		if final < t.last {
			final = t.last
		}
		c.done += final
		c.mu.Unlock()
		runtime.UnlockOSThread()
	}
}

func (c *threadClock) cpuTime() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	total := c.done
	for t := range c.threads {
		// A failed read (the thread cannot be gone while tracked) keeps
		// the previous sample.
		if d := clockTime(threadCPUClock(t.tid)) - t.base; d > t.last {
			t.last = d
		}
		total += t.last
	}
	return total
}
