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
	"fmt"
	"io/fs"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// fakeCPU is a CPU clock that the test advances.
type fakeCPU struct {
	mu sync.Mutex
	t  time.Duration
}

func (f *fakeCPU) cpuTime() time.Duration { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeCPU) add(d time.Duration)    { f.mu.Lock(); f.t += d; f.mu.Unlock() }

// fakeTarget records charges; openErrs are returned by the first opens,
// chargeErrs by the first charges.
type fakeTarget struct {
	mu         sync.Mutex
	openErrs   []error
	chargeErrs []error
	opens      int
	charges    []uint64
	closed     bool
	// The container's debt and limit, for pacing (no quota: no pacing),
	// and its limited ancestors'.
	d       debt
	parents []debt
}

func (f *fakeTarget) open() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opens++
	if len(f.openErrs) > 0 {
		err := f.openErrs[0]
		f.openErrs = f.openErrs[1:]
		return err
	}
	return nil
}

func (f *fakeTarget) charge(us uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.chargeErrs) > 0 {
		err := f.chargeErrs[0]
		f.chargeErrs = f.chargeErrs[1:]
		if err != nil {
			return err
		}
	}
	f.charges = append(f.charges, us)
	return nil
}

func (f *fakeTarget) close() { f.mu.Lock(); f.closed = true; f.mu.Unlock() }

func (f *fakeTarget) debt() ([]debt, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ds []debt
	for i, d := range append([]debt{f.d}, f.parents...) {
		d.level = i
		if d.quota > 0 {
			ds = append(ds, d)
		}
	}
	return ds, len(ds) > 0
}

// setDebt: the kernel's view after paying paid µs of it.
func (f *fakeTarget) setDebt(outstanding, paid uint64) {
	f.mu.Lock()
	f.d.outstanding = outstanding
	f.d.deducted += paid
	f.mu.Unlock()
}

func (f *fakeTarget) total() (sum uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.charges {
		sum += c
	}
	return sum
}

// fakeClock hands every timer the charger asks for to the test, which
// checks its duration and fires it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers chan *fakeTimer
}

type fakeTimer struct {
	d time.Duration
	c chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1000, 0), timers: make(chan *fakeTimer, 1)}
}

func (f *fakeClock) Now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }

func (f *fakeClock) advance(d time.Duration) { f.mu.Lock(); f.now = f.now.Add(d); f.mu.Unlock() }

func (f *fakeClock) NewTimer(d time.Duration) timer {
	t := &fakeTimer{d: d, c: make(chan time.Time, 1)}
	f.timers <- t
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }
func (t *fakeTimer) Stop() bool          { return true }

// timerWithin returns the charger's next timer, or nil if it asks for
// none within d.
func (f *fakeClock) timerWithin(d time.Duration) *fakeTimer {
	select {
	case tm := <-f.timers:
		return tm
	case <-time.After(d):
		return nil
	}
}

// next waits for the charger's next timer.
func (f *fakeClock) next(t *testing.T) *fakeTimer {
	t.Helper()
	tm := f.timerWithin(5 * time.Second)
	assert.Assert(t, tm != nil, "the charger asked for no timer")
	return tm
}

// expectNoTimer checks that the charger stopped asking for wakeups.
func (f *fakeClock) expectNoTimer(t *testing.T) {
	t.Helper()
	tm := f.timerWithin(50 * time.Millisecond)
	assert.Assert(t, tm == nil, "the charger still wakes up (timer of %v)", tm)
}

// closedWithin reports whether ch is closed within d.
func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

type warnings struct {
	mu    sync.Mutex
	msgs  []string
	debug []string // the debug messages, where a test records them here
}

func (w *warnings) debugf(format string, args ...interface{}) {
	w.mu.Lock()
	w.debug = append(w.debug, fmt.Sprintf(format, args...))
	w.mu.Unlock()
}

func (w *warnings) warnf(format string, args ...interface{}) {
	w.mu.Lock()
	w.msgs = append(w.msgs, fmt.Sprintf(format, args...))
	w.mu.Unlock()
}

func (w *warnings) count() int { w.mu.Lock(); defer w.mu.Unlock(); return len(w.msgs) }

func newTestCharger(tgt *fakeTarget) (*Charger, *fakeCPU, *fakeClock, *warnings) {
	cpu, clk, w := &fakeCPU{}, newFakeClock(), &warnings{}
	c := newCharger(cpu, tgt, clk, w.warnf)
	c.debugf = w.debugf
	return c, cpu, clk, w
}

const ms = time.Millisecond

// cadence feeds the charger one tick's CPU time after another and returns
// the intervals it chose.
func cadence(t *testing.T, used ...time.Duration) []time.Duration {
	t.Helper()
	c, cpu, _, _ := newTestCharger(&fakeTarget{})
	var got []time.Duration
	for _, u := range used {
		cpu.add(u)
		assert.Assert(t, c.tick(false), "charging stopped")
		got = append(got, c.interval)
	}
	return got
}

// TestCadence: the threads charged in thread mode use no CPU time when the
// logger is idle.
func TestCadence(t *testing.T) {
	got := cadence(t,
		0,          // idle
		2*ms, 2*ms, // busy
		0, 0, 0, 0, 0, // idle: double up to 100 ms
		idleThreshold/2, // still idle
		idleThreshold,   // activity: back to 10 ms at once
	)
	want := []time.Duration{20 * ms, 10 * ms, 10 * ms, 20 * ms, 40 * ms, 80 * ms, 100 * ms, 100 * ms, 100 * ms, 10 * ms}
	assert.Check(t, is.DeepEqual(got, want), "intervals")
}

// TestCadenceSelfCost: in process mode every wakeup of the charger costs
// CPU time (300 µs here, as in a VM), which must not look like activity.
func TestCadenceSelfCost(t *testing.T) {
	const wake = 300 * time.Microsecond
	got := cadence(t,
		25*ms,                              // the first tick has the logger's start-up
		wake, wake, wake, wake, wake, wake, // idle: back off
		wake+200*time.Microsecond, // jitter of the wakeup: still idle
		wake+ms, wake+ms,          // 1 ms of work: activity
		wake, // idle again
	)
	want := []time.Duration{20 * ms, 40 * ms, 80 * ms, 100 * ms, 100 * ms, 100 * ms, 100 * ms, 100 * ms, 10 * ms, 10 * ms, 20 * ms}
	assert.Check(t, is.DeepEqual(got, want), "intervals")
}

// TestLoop runs the charging goroutine on the fake clock: it asks for the
// intervals of the cadence, charges at each tick and flushes on Stop.
func TestLoop(t *testing.T) {
	tgt := &fakeTarget{}
	c, cpu, clk, _ := newTestCharger(tgt)
	c.run()
	var intervals []time.Duration
	for _, used := range []time.Duration{0, 3 * ms, 3 * ms, 0, 0, 0, 0, 0, 5 * ms} {
		tm := clk.next(t)
		intervals = append(intervals, tm.d)
		cpu.add(used)
		tm.c <- clk.Now()
	}
	tm := clk.next(t)
	intervals = append(intervals, tm.d)
	want := []time.Duration{10 * ms, 20 * ms, 10 * ms, 10 * ms, 20 * ms, 40 * ms, 80 * ms, 100 * ms, 100 * ms, 10 * ms}
	assert.Check(t, is.DeepEqual(intervals, want), "intervals")
	assert.Check(t, is.Equal(tgt.total(), uint64(11000)), "charged µs before Stop")
	// Used since the last tick, with a sub-µs part: the final flush
	// charges the whole microseconds.
	cpu.add(2*ms + 700)
	c.Stop()
	assert.Check(t, is.Equal(tgt.total(), uint64(13000)), "charged µs after Stop")
	assert.Check(t, tgt.closed, "the target was not closed")
	c.Stop() // twice is fine
}

func TestRemainderCarried(t *testing.T) {
	tgt := &fakeTarget{}
	c, cpu, _, _ := newTestCharger(tgt)
	for i := 0; i < 4; i++ {
		cpu.add(1500 * time.Nanosecond)
		c.tick(false)
	}
	assert.Check(t, is.DeepEqual(tgt.charges, []uint64{1, 2, 1, 2}), "charges")
	cpu.add(999 * time.Nanosecond)
	c.tick(true)
	assert.Check(t, is.Equal(tgt.total(), uint64(6)), "charged µs")
	assert.Check(t, is.Equal(c.pending, 999*time.Nanosecond), "pending")
}

func TestClockGoingBackIsIgnored(t *testing.T) {
	tgt := &fakeTarget{}
	c, cpu, _, _ := newTestCharger(tgt)
	cpu.add(5 * ms)
	c.tick(false)
	cpu.add(-2 * ms) // a failed read returns 0, less than before
	c.tick(false)
	cpu.add(3 * ms)
	c.tick(false)
	assert.Check(t, is.Equal(tgt.total(), uint64(6000)), "charged µs: each once")
}

func TestWaitsForTheCgroup(t *testing.T) {
	notYet := fmt.Errorf("%w (/x)", errNotYet)
	tgt := &fakeTarget{openErrs: []error{notYet, notYet, notYet}}
	c, cpu, _, w := newTestCharger(tgt)
	for i := 0; i < 3; i++ {
		cpu.add(4 * ms)
		assert.Assert(t, c.tick(false), "gave up before the timeout")
	}
	assert.Assert(t, is.Len(tgt.charges, 0), "charged before the cgroup existed")
	cpu.add(1 * ms)
	c.tick(false)
	assert.Check(t, is.DeepEqual(tgt.charges, []uint64{13000}), "charges")
	assert.Check(t, is.Equal(w.count(), 0), "warnings %v", w.msgs)
	assert.Check(t, is.Equal(tgt.opens, 4), "opens")
}

// The cgroup is looked for every 10 ms at first (the runtime makes it
// within milliseconds), then every 100 ms: a logger whose container is
// slow to be created, or whose cgroup this package cannot work out, does
// not wake 100 times a second for a minute.
func TestWaitsForTheCgroupLessOften(t *testing.T) {
	notYet := fmt.Errorf("%w (/x)", errNotYet)
	tgt := &fakeTarget{openErrs: []error{notYet, notYet}}
	c, _, clk, _ := newTestCharger(tgt)
	assert.Assert(t, c.tick(false), "at first: charging stopped")
	assert.Assert(t, is.Equal(c.interval, minInterval), "at first")
	clk.advance(fastResolve)
	assert.Check(t, c.tick(false), "after %v: charging stopped", fastResolve)
	assert.Check(t, is.Equal(c.interval, maxInterval), "after %v", fastResolve)
}

func TestGivesUpWaiting(t *testing.T) {
	notYet := fmt.Errorf("%w (/x)", errNotYet)
	tgt := &fakeTarget{openErrs: []error{notYet, notYet, notYet}}
	c, cpu, clk, w := newTestCharger(tgt)
	cpu.add(ms)
	assert.Assert(t, c.tick(false), "gave up at once")
	clk.advance(resolveTimeout)
	assert.Assert(t, !c.tick(false), "still waiting after the timeout")
	assert.Check(t, is.Equal(w.count(), 1), "warnings %v; want one", w.msgs)
	assert.Check(t, is.Len(tgt.charges, 0), "charges")
}

// TestStopsOnce: the cases where charging stops for good, after exactly
// one message and with no more wakeups. The conditions in which charging
// cannot work are expected: a debug message, not a warning.
func TestStopsOnce(t *testing.T) {
	for name, tc := range map[string]struct {
		tgt   *fakeTarget
		debug bool
	}{
		"stock kernel":   {&fakeTarget{openErrs: []error{fmt.Errorf("%w: /x/cpu.cfs.borrowing_us does not exist", errNoFile)}}, true},
		"no cpu":         {&fakeTarget{openErrs: []error{errNoCPU}}, true},
		"no quota":       {&fakeTarget{openErrs: []error{errNoQuota}}, true},
		"gone at open":   {&fakeTarget{openErrs: []error{errCgroupGone}}, true},
		"bad path":       {&fakeTarget{openErrs: []error{errBadCgroupPath}}, false},
		"cgroup removed": {&fakeTarget{chargeErrs: []error{nil, errCgroupGone}}, true},
		// The kernel's refusals: no warning where charging is not
		// allowed (rootless outside the user's subtree, v1 without
		// CAP_SYS_ADMIN), at the first write or at open.
		"EPERM":          {&fakeTarget{chargeErrs: []error{syscall.EPERM}}, true},
		"EACCES":         {&fakeTarget{chargeErrs: []error{syscall.EACCES}}, true},
		"EROFS":          {&fakeTarget{chargeErrs: []error{syscall.EROFS}}, true},
		"EACCES at open": {&fakeTarget{openErrs: []error{&fs.PathError{Op: "open", Path: "/x/" + FileName, Err: syscall.EACCES}}}, true},
	} {
		tgt, debug := tc.tgt, tc.debug
		t.Run(name, func(t *testing.T) {
			c, cpu, clk, w := newTestCharger(tgt)
			c.run()
			ticks, ended := 0, false
		loop:
			for {
				select {
				case tm := <-clk.timers:
					cpu.add(ms)
					tm.c <- clk.Now()
					ticks++
				case <-c.done: // the goroutine ended by itself
					ended = true
					break loop
				case <-time.After(5 * time.Second):
					break loop
				}
			}
			assert.Assert(t, ended, "still charging after %d ticks; warnings %q", ticks, w.msgs)
			clk.expectNoTimer(t)
			cpu.add(ms)
			c.Stop() // no final flush once stopped
			if debug {
				assert.Check(t, is.Equal(w.count(), 0), "warnings %q: want one debug message", w.msgs)
				assert.Check(t, is.Len(w.debug, 1), "debug messages: want one")
			} else {
				assert.Check(t, is.Equal(w.count(), 1), "warnings %q: want one", w.msgs)
				assert.Check(t, is.Len(w.debug, 0), "debug messages: want none")
			}
			if name == "cgroup removed" {
				assert.Check(t, is.DeepEqual(tgt.charges, []uint64{1000}), "charges: want the one before the removal")
			}
			assert.Check(t, tgt.closed, "the target was not closed")
		})
	}
}

// TestWriteErrors: other write errors drop their amount, are reported once
// per kind, and charging goes on.
func TestWriteErrors(t *testing.T) {
	tgt := &fakeTarget{chargeErrs: []error{syscall.EINVAL, syscall.EINVAL, syscall.ERANGE, nil, syscall.EIO, syscall.EINVAL}}
	c, cpu, _, w := newTestCharger(tgt)
	for i := 0; i < 7; i++ {
		cpu.add(ms)
		assert.Assert(t, c.tick(false), "charging stopped at tick %d", i)
	}
	assert.Check(t, is.DeepEqual(tgt.charges, []uint64{1000, 1000}), "charges: failed amounts are dropped, not retried")
	assert.Check(t, is.Equal(w.count(), 3), "warnings %q: want one each for EINVAL, ERANGE, EIO", w.msgs)
	assert.Check(t, is.Equal(c.dropped, uint64(5000)), "dropped")
	assert.Check(t, is.Equal(c.charged, uint64(2000)), "charged")
	assert.Check(t, is.Equal(c.pending, time.Duration(0)), "pending")
}

func TestOffAndNil(t *testing.T) {
	c := Start(Options{Mode: ModeOff, ContainerID: "x"})
	assert.Check(t, c.stop == nil && c.threads == nil, "mode off started something")
	c.TrackThread()()
	c.Stop()
	var n *Charger
	n.TrackThread()()
	n.Stop()
}

// paceReturns reports whether Pace returns within d.
func paceReturns(c *Charger, d time.Duration) bool {
	done := make(chan struct{})
	go func() { c.Pace(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// notPaused reports whether the copying goroutines are free to go on: the
// charger says so, or a call to Pace returns within 50 ms. (A Pace that has
// not returned alone does not show a pause: its goroutine may not have run.)
func notPaused(c *Charger) bool {
	return !c.paused.Load() || paceReturns(c, 50*ms)
}

func TestPacing(t *testing.T) {
	tgt := &fakeTarget{d: debt{quota: 50000, period: 100000}}
	c, cpu, clk, _ := newTestCharger(tgt)
	c.pace = true
	var owed uint64
	// step: a tick of 10 ms in which the logger, unless it waits, used
	// 10 ms (charged by the tick) and the kernel took paid µs off the debt.
	step := func(paid uint64) {
		t.Helper()
		if !c.paused.Load() {
			cpu.add(10 * ms)
			owed += 10000
		}
		owed -= paid
		clk.advance(10 * ms)
		tgt.setDebt(owed, paid)
		assert.Assert(t, c.tick(false), "charging stopped")
	}

	// Up to one period's quota owed: the logger goes on.
	for i := 0; i < 5; i++ {
		step(0)
	}
	assert.Assert(t, is.Equal(owed, uint64(50000)), "the debt: one quota")
	assert.Assert(t, paceReturns(c, time.Second), "paused with a debt of %d, one quota", owed)
	// More: it waits, and the charger polls at the fast cadence.
	step(0)
	assert.Assert(t, !notPaused(c), "not paused with a debt above one quota")
	assert.Check(t, is.Equal(c.interval, c.busyInterval()), "interval while paused: want the busy cadence")
	waiter := make(chan struct{})
	go func() { c.Pace(); close(waiter) }()
	// A period pays part of it: still waiting.
	step(5000)
	assert.Assert(t, !closedWithin(waiter, 50*ms), "released before the debt is down to one quota")
	assert.Assert(t, c.paused.Load(), "released before the debt is down to one quota")
	// Paid down: everyone waiting is released.
	step(50000)
	assert.Assert(t, closedWithin(waiter, time.Second), "still waiting once the debt is paid")

	// A debt that nobody pays (the container's tasks have exited): the
	// wait ends after the stall time, three periods here.
	for !c.paused.Load() {
		step(0)
	}
	for i := 0; i < 25; i++ { // 250 ms
		step(0)
	}
	assert.Assert(t, !notPaused(c), "released before the stall time")
	for i := 0; i < 10; i++ {
		step(0)
	}
	assert.Assert(t, paceReturns(c, time.Second), "still paused by a debt that has not moved for 350 ms")
	// The logger works again and charges; nobody pays: no new pause.
	for i := 0; i < 5; i++ {
		step(0)
		assert.Assert(t, paceReturns(c, time.Second), "paused again by a debt that is not being paid")
	}
	// Payments resume: so does pacing.
	step(5000)
	assert.Assert(t, !notPaused(c), "not paused once payments resumed")
	assert.Check(t, is.Equal(c.pauses, uint64(3)), "pauses")
}

func TestNoPacing(t *testing.T) {
	// Thread mode and containers without a quota are never paced; nor is
	// a nil Charger (cpu-charge=off).
	for name, tc := range map[string]struct {
		pace  bool
		quota uint64
	}{"thread mode": {false, 50000}, "no quota": {true, 0}} {
		tgt := &fakeTarget{d: debt{quota: tc.quota, period: 100000, outstanding: 10_000_000}}
		c, cpu, _, _ := newTestCharger(tgt)
		c.pace = tc.pace
		cpu.add(10 * ms)
		c.tick(false)
		assert.Check(t, paceReturns(c, time.Second), "%s: paused", name)
	}
	var nilCharger *Charger
	nilCharger.Pace()
}

func TestStopReleasesPace(t *testing.T) {
	tgt := &fakeTarget{d: debt{quota: 50000, period: 100000, outstanding: 90000}}
	c, cpu, clk, _ := newTestCharger(tgt)
	c.pace = true
	c.run()
	cpu.add(10 * ms)
	clk.next(t).c <- time.Time{}
	tm := clk.next(t) // the charger is waiting again
	assert.Assert(t, !notPaused(c), "not paused")
	waiter := make(chan struct{})
	go func() { c.Pace(); close(waiter) }()
	c.Stop()
	assert.Assert(t, closedWithin(waiter, time.Second), "Stop left the copying goroutines waiting")
	_ = tm
}

// nopTracker is a thread registry that tracks nothing.
type nopTracker struct{}

func (nopTracker) track() func() { return func() {} }

func TestBusyInterval(t *testing.T) {
	// 10 ms, unless 20 wakeups cost more (an emulated CPU); at most 100 ms.
	for cost, want := range map[time.Duration]time.Duration{
		0:                      minInterval,
		200 * time.Microsecond: minInterval,
		2 * ms:                 40 * ms,
		20 * ms:                maxInterval,
	} {
		c := &Charger{selfCost: cost}
		assert.Check(t, is.Equal(c.busyInterval(), want), "wakeup cost %v: busy interval", cost)
	}
	// Thread mode: no pacing, the longest interval.
	c := &Charger{threads: nopTracker{}}
	assert.Check(t, is.Equal(c.busyInterval(), maxInterval), "thread mode: busy interval")
}

// stalledStream returns a stream's channel holding queued lines, known
// to c (if any) as relayed by a relay that takes nothing (its driver is
// busy), and take, which makes the relay take n of them (all: n < 0).
func stalledStream(c *Charger, queued int) (in chan string, take func(n int)) {
	in = make(chan string, 10000)
	for i := 0; i < queued; i++ {
		in <- "line"
	}
	took := make(chan struct{}, 1)
	if c != nil {
		took = c.addRelay(in)
	}
	return in, func(n int) {
		for ; n != 0 && len(in) > 0; n-- {
			<-in
			select {
			case took <- struct{}{}:
			default:
			}
		}
	}
}

// waitQueueReturns reports whether WaitQueue returns within d with
// queued lines in the stream's channel.
func waitQueueReturns(c *Charger, queued int, d time.Duration) bool {
	in, _ := stalledStream(c, queued)
	done := make(chan struct{})
	go func() { c.WaitQueue(in); close(done) }()
	return closedWithin(done, d)
}

// boundedCharger returns a pacing charger whose readers' queues are
// bounded (the debt read close to pacing) and which never pauses them.
func boundedCharger(t *testing.T) (*Charger, *fakeTarget, *fakeCPU) {
	t.Helper()
	tgt := &fakeTarget{d: debt{quota: 50000, period: 100000, outstanding: 30000}} // 60 %: close to pacing
	c, cpu, _, _ := newTestCharger(tgt)
	c.pace = true
	cpu.add(ms)
	c.tick(false)
	assert.Assert(t, notPaused(c), "paused below the pace")
	assert.Assert(t, !c.freeQueue.Load(), "close to pacing: the queue is not bounded")
	return c, tgt, cpu
}

// TestWaitQueue: the readers' queues are the stock ones (10000 lines)
// where the logger does not pace or pacing is far; close to pacing a reader
// waits once it has relayBatch lines queued, until the relay took them
// all (one wait per batch), woken by the relay, not by a timer.
func TestWaitQueue(t *testing.T) {
	var off *Charger
	assert.Assert(t, waitQueueReturns(off, 9999, time.Second), "a charger that paces nothing bounds the queue")
	assert.Assert(t, waitQueueReturns(&Charger{}, 9999, time.Second), "a charger that paces nothing bounds the queue")
	tgt := &fakeTarget{d: debt{quota: 50000, period: 100000, outstanding: 20000}}
	c, cpu, _, _ := newTestCharger(tgt)
	c.pace = true
	assert.Assert(t, !waitQueueReturns(c, relayBatch, 50*ms), "process mode, before the debt is read: the queue is not bounded")
	cpu.add(ms)
	c.tick(false)
	assert.Assert(t, waitQueueReturns(c, 9999, time.Second), "owing 40 % of what paces: the queue is bounded")
	c, tgt, cpu = boundedCharger(t)
	assert.Assert(t, waitQueueReturns(c, relayBatch-1, time.Second), "close to pacing: a reader waits before its batch is queued")
	assert.Assert(t, !waitQueueReturns(c, 9999, 50*ms), "close to pacing: a full stock queue goes on")
	// Woken by the relay: no timer would wake it within the test. (Under
	// mu: the reader that waits above on a full stock queue reads it.)
	c.mu.Lock()
	c.queuePoll = time.Hour
	c.mu.Unlock()
	in, take := stalledStream(c, relayBatch)
	done := make(chan struct{})
	go func() { c.WaitQueue(in); close(done) }()
	assert.Assert(t, !closedWithin(done, 50*ms), "close to pacing: a reader with %d lines queued goes on", relayBatch)
	take(1)
	assert.Assert(t, !closedWithin(done, 50*ms), "a reader goes on before the relay took its whole batch")
	take(-1)
	assert.Assert(t, closedWithin(done, 10*time.Second), "the relay took every line: the reader waits on")
	tgt.setDebt(10000, 20000) // paid down: the bound stays
	cpu.add(ms)
	c.tick(false)
	assert.Assert(t, !waitQueueReturns(c, relayBatch, 50*ms), "the debt paid down after coming close to pacing: the queue is not bounded")
	// StopPacing (SIGTERM): the stock queue again, for good.
	c.StopPacing()
	assert.Assert(t, waitQueueReturns(c, 9999, time.Second), "the queue is bounded after StopPacing")
	cpu.add(ms)
	c.tick(false)
	assert.Assert(t, waitQueueReturns(c, 9999, time.Second), "the queue is bounded again after StopPacing")
}

// TestRelay: close to pacing, a stream's lines reach the driver through
// the relay in order and at the driver's pace, the reader woken by every
// line the relay takes (no timer would wake it within the test), never
// more than relayBatch lines queued for the relay; where the logger does
// not pace the driver takes from the reader's channel itself.
func TestRelay(t *testing.T) {
	var off *Charger
	in := make(chan string, 10000)
	assert.Check(t, off.Relay(in) == (<-chan string)(in), "no charger: a relay")
	assert.Check(t, (&Charger{}).Relay(in) == (<-chan string)(in), "a charger that paces nothing: a relay")
	c, _, _ := boundedCharger(t)
	c.queuePoll = time.Hour
	out := c.Relay(in)
	const lines = 20000
	go func() {
		for i := 0; i < lines; i++ {
			c.WaitQueue(in)
			in <- strconv.Itoa(i)
		}
		close(in)
	}()
	got, most := 0, 0
	deadline := time.After(10 * time.Second)
	for got < lines {
		select {
		case line, ok := <-out:
			assert.Assert(t, ok, "the driver's channel closed after %d lines of %d", got, lines)
			assert.Assert(t, is.Equal(line, strconv.Itoa(got)), "line %d out of order", got)
			got++
			most = max(most, len(in))
		case <-deadline:
			t.Fatalf("%d lines of %d reached the driver in 10 s: the reader waits for a timer", got, lines)
		}
	}
	_, ok := <-out
	assert.Check(t, !ok, "the driver's channel is not closed after the reader's")
	assert.Check(t, most <= relayBatch, "%d lines queued for the relay (at most %d)", most, relayBatch)
}

// pausedCharger returns a pacing charger whose copying goroutines wait:
// the container owes more than one period's quota.
func pausedCharger(t *testing.T) (*Charger, *fakeTarget, *fakeCPU, *fakeClock, *warnings) {
	t.Helper()
	tgt := &fakeTarget{d: debt{quota: 50000, period: 100000, outstanding: 90000}}
	c, cpu, clk, w := newTestCharger(tgt)
	c.pace = true
	cpu.add(10 * ms)
	assert.Assert(t, c.tick(false), "charging stopped")
	assert.Assert(t, !notPaused(c), "not paused")
	return c, tgt, cpu, clk, w
}

// TestPaceReleasedOnWriteError: a write that fails with an error that does
// not stop charging must not leave the copying goroutines waiting once the
// debt is paid; nor may the debt's files becoming unreadable.
func TestPaceReleasedOnWriteError(t *testing.T) {
	for _, err := range []error{syscall.EIO, syscall.EINVAL, syscall.ERANGE} {
		c, tgt, cpu, clk, _ := pausedCharger(t)
		tgt.setDebt(0, 90000) // paid
		tgt.chargeErrs = []error{err}
		cpu.add(ms)
		clk.advance(10 * ms)
		assert.Assert(t, c.tick(false), "%v: charging stopped", err)
		assert.Check(t, paceReturns(c, time.Second), "%v: the readers stay paused after a failed write", err)
	}
	// Still owed, but the write fails: released all the same.
	c, tgt, cpu, _, _ := pausedCharger(t)
	tgt.chargeErrs = []error{syscall.EIO}
	cpu.add(ms)
	c.tick(false)
	assert.Check(t, paceReturns(c, time.Second), "paused across a failed write")
	// The debt cannot be read any more (the limit removed): released.
	c, tgt, cpu, _, _ = pausedCharger(t)
	tgt.d.quota = 0
	cpu.add(ms)
	c.tick(false)
	assert.Check(t, paceReturns(c, time.Second), "paused with no debt to read")
}

// TestPaceReleasedWhenCgroupRemoved: the cgroup removed while the logger
// waits (the task is deleted): charging stops and the goroutines go on.
func TestPaceReleasedWhenCgroupRemoved(t *testing.T) {
	tgt := &fakeTarget{d: debt{quota: 50000, period: 100000, outstanding: 90000}}
	c, cpu, clk, _ := newTestCharger(tgt)
	c.pace = true
	c.run()
	cpu.add(10 * ms)
	clk.next(t).c <- clk.Now()
	tm := clk.next(t)
	assert.Assert(t, !notPaused(c), "not paused")
	waiter := make(chan struct{})
	go func() { c.Pace(); close(waiter) }()
	tgt.mu.Lock()
	tgt.chargeErrs = []error{errCgroupGone}
	tgt.mu.Unlock()
	cpu.add(ms)
	tm.c <- clk.Now()
	assert.Assert(t, closedWithin(waiter, time.Second), "still waiting after the cgroup was removed")
	<-c.done
	c.Stop()
}

// TestStopPacing: after StopPacing (SIGTERM) the goroutines that wait are
// released and none waits again, whatever the debt.
func TestStopPacing(t *testing.T) {
	c, _, cpu, clk, _ := pausedCharger(t)
	waiter := make(chan struct{})
	go func() { c.Pace(); close(waiter) }()
	c.StopPacing()
	assert.Assert(t, closedWithin(waiter, time.Second), "StopPacing left the goroutines waiting")
	for i := 0; i < 3; i++ {
		cpu.add(10 * ms)
		clk.advance(10 * ms)
		c.tick(false)
		assert.Assert(t, paceReturns(c, time.Second), "paused again after StopPacing")
	}
	var nilCharger *Charger
	nilCharger.StopPacing()
}

// TestPacingParentQuota: the quota is on a parent (--cgroup-parent), or on
// both: the logger waits while any limited level owes more than its quota.
func TestPacingParentQuota(t *testing.T) {
	for name, tgt := range map[string]*fakeTarget{
		"parent only": {d: debt{period: 100000}, parents: []debt{{outstanding: 90000, quota: 50000, period: 100000}}},
		"both, the parent owes": {d: debt{outstanding: 10000, quota: 50000, period: 100000},
			parents: []debt{{outstanding: 30000, quota: 20000, period: 100000}}},
	} {
		c, cpu, _, _ := newTestCharger(tgt)
		c.pace = true
		cpu.add(10 * ms)
		c.tick(false)
		assert.Check(t, !notPaused(c), "%s: not paused with the parent over its quota", name)
		tgt.mu.Lock()
		tgt.parents[0].outstanding = 0
		tgt.parents[0].deducted += 90000
		tgt.mu.Unlock()
		cpu.add(ms)
		c.tick(false)
		assert.Check(t, paceReturns(c, time.Second), "%s: still paused once the parent paid", name)
	}
}

// TestPacingSharedParent: containers under one limited parent (a pod's
// cgroup) each pace by their own part of its debt: a quiet container's
// logger does not wait for what a flooding sibling owes the parent, and
// the flooder's does.
func TestPacingSharedParent(t *testing.T) {
	// The sibling has charged the parent 90 ms, beyond the 50 ms that
	// pace; this logger charges 1 ms a tick.
	quiet := &fakeTarget{d: debt{period: 100000},
		parents: []debt{{outstanding: 90000, borrowed: 90000, quota: 50000, period: 100000}}}
	c, cpu, _, _ := newTestCharger(quiet)
	c.pace = true
	for i := 1; i <= 5; i++ {
		cpu.add(ms)
		quiet.mu.Lock()
		quiet.parents[0].outstanding += 1000 - 500 // and the parent paid 0.5 ms
		quiet.parents[0].borrowed += 1000
		quiet.parents[0].deducted += 500
		quiet.mu.Unlock()
		c.tick(false)
		assert.Assert(t, notPaused(c), "tick %d: the quiet container's logger waits for its sibling's debt", i)
	}
	owed := c.shares[1].owed
	assert.Check(t, owed > 0 && owed <= 5000, "the quiet logger's part of the parent's debt: %d µs, want above 0 and at most its 5000 µs", owed)

	// The flooder: its charges make up the parent's debt.
	flood := &fakeTarget{d: debt{period: 100000},
		parents: []debt{{outstanding: 1000, borrowed: 1000, quota: 50000, period: 100000}}}
	c, cpu, _, _ = newTestCharger(flood)
	c.pace = true
	paused := false
	for i := 1; i <= 10 && !paused; i++ {
		cpu.add(10 * ms)
		flood.mu.Lock()
		flood.parents[0].outstanding += 10000 - 1000
		flood.parents[0].borrowed += 10000
		flood.parents[0].deducted += 1000
		flood.mu.Unlock()
		c.tick(false)
		paused = !notPaused(c)
	}
	assert.Check(t, paused, "the flooder's logger does not wait with the parent's debt its own")
}

// TestPacingSharedParentWaitEnds: a logger waiting on its part of a
// parent's debt that a sibling keeps at the bound (the parent pays 10 ms
// and drops the rest of the sibling's 17 ms a tick) resumes once the part
// it owed is paid down, although its own wakeups while it waits (3 ms a
// tick) are charged meanwhile: counted in its part, they would hold it
// at about 78 ms, above the 50 ms that pace, for good.
func TestPacingSharedParentWaitEnds(t *testing.T) {
	parent := &fakeTarget{d: debt{period: 100000},
		parents: []debt{{outstanding: 500000, borrowed: 500000, quota: 50000, period: 100000}}}
	c, cpu, _, _ := newTestCharger(parent)
	c.pace = true
	c.charged = 480000 // its start, charged before the first reading
	cpu.add(3 * ms)
	c.tick(false)
	assert.Assert(t, !notPaused(c), "not waiting with 480 ms of the parent's debt its own")
	for i := 1; c.paused.Load(); i++ {
		assert.Assert(t, i <= 100, "still waiting after %d ticks, its part %d µs", i, c.shares[1].owed)
		cpu.add(3 * ms)
		parent.mu.Lock()
		parent.parents[0].borrowed += 3000 + 17000
		parent.parents[0].deducted += 10000 // and the rest dropped at the bound
		parent.mu.Unlock()
		c.tick(false)
	}
	assert.Check(t, notPaused(c), "the copying goroutines are still held")
	assert.Check(t, c.charged >= 480000+3000*2, "charged %d µs: the wakeups while waiting are charged all the same", c.charged)
}

// TestOpenCadence: until the container's cgroup is found the charger looks
// at the busy cadence, so that a short-lived container's is found before
// it is removed; and the final flush without it says so at debug level.
func TestOpenCadence(t *testing.T) {
	notYet := fmt.Errorf("%w (/x)", errNotYet)
	tgt := &fakeTarget{openErrs: []error{notYet, notYet, notYet, notYet, notYet}}
	c, _, _, w := newTestCharger(tgt)
	for i := 0; i < 4; i++ {
		assert.Assert(t, c.tick(false), "tick %d: charging stopped", i)
		assert.Assert(t, is.Equal(c.interval, minInterval), "tick %d: interval while the cgroup is not found", i)
	}
	c.pending = 1500 * time.Microsecond
	c.tick(true)
	assert.Check(t, is.Equal(w.count(), 0), "warnings %q", w.msgs)
	if assert.Check(t, is.Len(w.debug, 1), "debug messages: want one with what was not charged") {
		assert.Check(t, is.Contains(w.debug[0], "1.5ms not charged"))
	}
}

// TestPaceAtLongPeriods: with periods of a second the kernel keeps about
// one period's quota: the logger waits from half of it.
func TestPaceAtLongPeriods(t *testing.T) {
	tgt := &fakeTarget{d: debt{quota: 100000, period: 1000000, outstanding: 60000}}
	c, cpu, _, _ := newTestCharger(tgt)
	c.pace = true
	cpu.add(10 * ms)
	c.tick(false)
	assert.Check(t, !notPaused(c), "not paused owing 60% of a 1 s period's quota")
	assert.Check(t, is.Equal((debt{quota: 50000, period: 100000}).paceAt(), uint64(50000)), "100 ms periods: want to wait from one quota")
}

// TestIdleSleepsUntilALine: an idle charger (backed off to the longest
// interval) asks for no timer; the next line taken (Pace) wakes it, and
// what was used meanwhile is charged then.
func TestIdleSleepsUntilALine(t *testing.T) {
	tgt := &fakeTarget{}
	c, cpu, clk, _ := newTestCharger(tgt)
	c.wakeOnRead = true
	c.run()
	// Idle ticks back off: 10, 20, 40, 80 ms, then the charger sleeps.
	for d := time.Duration(0); 2*d < maxInterval; {
		tm := clk.next(t)
		d = tm.d
		tm.c <- clk.Now()
	}
	clk.expectNoTimer(t)
	cpu.add(3 * ms) // the runtime's background work, then a line
	c.Pace()
	assert.Check(t, is.Equal(clk.next(t).d, minInterval), "after a line: want the busy interval")
	assert.Check(t, is.Equal(tgt.total(), uint64(3000)), "charged µs: want the 3000 used while asleep")
	c.Stop()
}

// TestCadenceByLines: where the copying goroutines report their lines, an
// interval without a line is idle however much CPU time it saw (a wakeup
// under emulation costs milliseconds, and varies), and one with a line is
// busy.
func TestCadenceByLines(t *testing.T) {
	c, cpu, _, _ := newTestCharger(&fakeTarget{})
	c.wakeOnRead = true
	var got []time.Duration
	for i, used := range []time.Duration{300 * time.Microsecond, 3 * ms, 5 * ms, 2 * ms, 4 * ms, 3 * ms} {
		cpu.add(used)
		if i == 4 {
			c.Pace() // a line
		}
		c.tick(false)
		got = append(got, c.interval)
	}
	want := []time.Duration{20 * ms, 40 * ms, 80 * ms, 100 * ms, 10 * ms, 20 * ms}
	assert.Check(t, is.DeepEqual(got, want), "intervals")
}
