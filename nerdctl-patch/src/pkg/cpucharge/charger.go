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

// Package cpucharge charges the CPU time that nerdctl's logging process
// spends for a container to that container's cgroup.
//
// The logging process runs outside the container (in the shim's cgroup),
// so the CPU it burns to copy a chatty container's output escapes the
// container's CPU quota. A kernel with CFS borrowing support has a file
// cpu.cfs.borrowing_us in every non-root cgroup: a write of N adds N
// microseconds that the kernel deducts from the cgroup's quota in the next
// bandwidth periods. On other kernels the file does not exist, and the
// charger starts nothing (nor with no quota on the container's path), and
// it stops, quietly, at the first charge the kernel refuses this process.
//
// The charger samples a CPU clock from its own goroutine, every 10 ms
// while the logger is busy, backing off to 100 ms when it is idle and then
// sleeping until the next line is copied, and writes what was used since
// the last write. It never changes the data:
// the logs are copied by the same code with or without it.
//
// In process mode it also paces the logger: charges are paid from the
// container's quota one period at a time, and a logger that runs ahead of
// them (a container writes in a millisecond what takes the logger much
// longer to copy) would pile up more debt than the kernel keeps, which is
// then dropped, uncharged. So while the container's outstanding borrowing
// exceeds one period's quota, the copying goroutines wait before taking
// the next line (Pace): the container's writes block on the full pipe, as
// with any slow logger, and the logger works only as fast as the container
// pays. Nothing is dropped; the wait ends when the debt is paid, when it
// stops being paid (the container's tasks exited, so no more periods run),
// or when charging stops.
package cpucharge

import (
	"errors"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containerd/log"
)

const (
	// minInterval is the sampling period while the logger is busy. The
	// default CFS period is 100 ms: a charge written within 10 ms is paid
	// in the next period, so the container cannot outrun it by much.
	minInterval = 10 * time.Millisecond
	// maxInterval ends the back-off of an idle logger: past it the
	// charger sleeps until the next line.
	maxInterval = 100 * time.Millisecond
	// idleThreshold: an interval in which the charged threads did less
	// work than this, beyond the charger's own wakeup, is idle and doubles
	// the interval.
	idleThreshold = 100 * time.Microsecond
	// resolveTimeout: the container's cgroup appears shortly after the
	// logger starts (the shim starts the logger, then runc creates the
	// container). One that has not appeared after this long never will
	// (a cgroup path this package cannot work out): stop looking.
	resolveTimeout = time.Minute
	// fastResolve is how long the cgroup is looked for at every
	// minInterval; after it, at every maxInterval.
	fastResolve = 2 * time.Second
	// minStall: a debt that has not shrunk for this long (or three of the
	// container's periods, if longer) is not being paid: stop waiting.
	minStall = 300 * time.Millisecond
)

// Options configures Start.
type Options struct {
	Mode        Mode
	Namespace   string // the containerd namespace (CONTAINER_NAMESPACE)
	ContainerID string // the container ID (CONTAINER_ID)
	// Root is where /proc, /run and the cgroup file systems are looked
	// up: "/" (the default) except in tests, which build a fake tree.
	Root string
	// Cwd is the logging process's working directory: the shim starts it
	// in the container's bundle. Default: os.Getwd().
	Cwd string
	// Warnf reports why charging stopped or lost time, once per reason,
	// when that is unexpected. Default: log.L.Warnf.
	Warnf func(format string, args ...interface{})
	// Debugf reports the expected reasons not to charge (a kernel without
	// the file, no quota, the container gone). Default: log.L.Debugf.
	Debugf func(format string, args ...interface{})
}

// cpuSource is the CPU time to charge so far; it never decreases.
type cpuSource interface {
	cpuTime() time.Duration
}

// threadTracker is the thread mode's registry of the copying threads.
type threadTracker interface {
	// track locks the calling goroutine to its OS thread and charges that
	// thread's CPU time from now on; untrack (deferred by the same
	// goroutine) takes its final sample and unlocks the thread.
	track() (untrack func())
}

// target is where charges go: the container's cpu.cfs.borrowing_us.
type target interface {
	// open finds and opens the file; errNotYet while the container's
	// cgroup does not exist or is not set up yet (its cpu controller or its
	// quota). Any other error is final.
	open() error
	// charge adds us microseconds; errCgroupGone once the cgroup is gone.
	charge(us uint64) error
	// debt returns the debt and limit of the container's cgroup and of
	// its ancestors with a quota; ok is false when none can be read with
	// a quota.
	debt() (ds []debt, ok bool)
	close()
}

// debt is a cgroup's borrowing and bandwidth limit, in µs.
type debt struct {
	level       int    // 0: the container's cgroup; 1, 2...: its ancestors, nearest first
	outstanding uint64 // still to be paid (cpu.cfs.borrowing_us)
	deducted    uint64 // paid so far (cpu.stat borrow_deducted)
	borrowed    uint64 // charged so far, by anyone (cpu.stat borrowed)
	quota       uint64
	period      uint64
}

// share follows this logger's part of an ancestor's debt: an ancestor
// (a pod's cgroup, a --cgroup-parent) is charged by every container
// below it, and a quiet container's logger must not wait for what a
// flooding sibling owes.
type share struct {
	owed        uint64 // this logger's part of the outstanding debt
	borrowed    uint64 // the level's borrowed at the last reading
	outstanding uint64 // and its outstanding
	charged     uint64 // this logger's charges (Charger.charged) then
}

var (
	errNotYet        = errors.New("the container's cgroup is not set up yet")
	errNoFile        = errors.New("this kernel cannot charge borrowed CPU time (no cpu.cfs.borrowing_us)")
	errNoCPU         = errors.New("no cpu.cfs.borrowing_us: the cpu controller is not enabled for the container's cgroup")
	errCgroupGone    = errors.New("the container's cgroup is gone")
	errBadCgroupPath = errors.New("cannot work out the container's cgroup")
)

// Charger charges a logging process's CPU time to its container. Create it
// with Start, stop it with Stop; the zero value (and nil) charge nothing.
type Charger struct {
	threads threadTracker // set in thread mode only
	stop    chan struct{} // nil when not charging
	done    chan struct{}
	once    sync.Once

	// The rest is owned by the charging goroutine (and by tests that call
	// tick without it).
	cpu      cpuSource
	target   target
	clock    clock
	warnf    func(format string, args ...interface{})
	debugf   func(format string, args ...interface{})
	prefix   string
	started  time.Time
	interval time.Duration
	selfCost time.Duration // the least CPU time a tick has seen (the charger's own wakeup); -1 before the first
	lastCPU  time.Duration // CPU time at the previous sample
	pending  time.Duration // measured but not charged yet (incl. the sub-µs remainder)
	charged  uint64        // µs written successfully
	dropped  uint64        // µs lost to failed writes
	opened   bool
	warned   map[string]bool

	// Pacing (process mode): paused is read by the copying goroutines at
	// every line; resume is closed to release them.
	pace         bool
	paused       atomic.Bool
	mu           sync.Mutex
	resume       chan struct{}
	noPace       bool                          // StopPacing was called: never pause again (under mu)
	freeQueue    atomic.Bool                   // no bound in WaitQueue: the debt read far from pacing, or pacing stopped
	relays       map[chan string]chan struct{} // by stream (Relay): a line taken (under mu)
	queuePoll    time.Duration                 // WaitQueue's look at the bound (0: queuePoll)
	nearPace     bool                          // the debt was once read close to pacing
	shares       map[int]*share                // by level (ancestors): this logger's part of each one's debt
	lastDeducted uint64                        // the kernel's count of paid debt at the last reading
	haveDebt     bool                          // lastDeducted is valid
	progress     time.Time                     // when a payment was last seen
	stalled      bool                          // the debt stopped being paid: do not wait for it
	pauses       uint64                        // how many times the logger waited

	// An idle charger sleeps until a copying goroutine takes a line
	// (wakeOnRead: they call Pace for every line), not on a timer.
	wakeOnRead bool
	sleeping   atomic.Bool
	wake       chan struct{}
	lines      atomic.Uint64 // lines taken since the last tick (wakeOnRead)
}

// Start starts charging the CPU time of this process (ModeProcess) or of
// the threads that call TrackThread (ModeThread) to the container's cgroup.
// ModeOff, and platforms without per-thread CPU clocks, return a Charger
// that does nothing.
func Start(o Options) *Charger {
	cpu, threads := newCPUSource(o.Mode)
	if cpu == nil {
		return &Charger{}
	}
	warnf, debugf := o.Warnf, o.Debugf
	if warnf == nil {
		warnf = log.L.Warnf
	}
	if debugf == nil {
		debugf = log.L.Debugf
	}
	prefix := "cpu-charge: container " + o.ContainerID + ": "
	loc := locator{root: o.Root, cwd: o.Cwd, ns: o.Namespace, id: o.ContainerID}
	if loc.root == "" {
		loc.root = "/"
	}
	if loc.cwd == "" {
		loc.cwd, _ = os.Getwd()
	}
	// Where charging cannot work, it costs nothing: no goroutine, no
	// wakeup, no write, the readers' full queues, one debug message.
	tgt := &cgroupTarget{loc: loc}
	if err := tgt.prepare(); err != nil && !errors.Is(err, errNotYet) {
		debugf("%s%v; not charging", prefix, err)
		return &Charger{}
	}
	return start(o.Mode, cpu, threads, tgt, warnf, debugf, prefix)
}

func start(m Mode, cpu cpuSource, threads threadTracker, tgt target, warnf, debugf func(string, ...interface{}), prefix string) *Charger {
	c := newCharger(cpu, tgt, realClock{}, warnf)
	c.debugf = debugf
	c.wakeOnRead = true
	c.threads = threads
	// Thread mode is the reference design (charge the copying threads,
	// nothing else): it is kept without pacing, for comparisons.
	c.pace = m == ModeProcess
	c.prefix = prefix
	c.run()
	return c
}

// Kernel stands for the kernel's side of a container's cgroup in the tests
// of the packages that run the charger (the logging process's), where no
// kernel with cpu.cfs.borrowing_us is at hand.
type Kernel interface {
	// Charge adds us microseconds to the debt (a write to
	// cpu.cfs.borrowing_us).
	Charge(us uint64) error
	// Debt returns the outstanding debt, what was paid so far
	// (borrow_deducted) and the bandwidth limit, in µs.
	Debt() (outstanding, deducted, quota, period uint64)
}

// StartWithKernel is Start with k in place of the container's cgroup: the
// same charger (the mode's CPU clock, the cadence, pacing in process mode)
// charging k. For tests.
func StartWithKernel(m Mode, k Kernel, warnf func(format string, args ...interface{})) *Charger {
	cpu, threads := newCPUSource(m)
	if cpu == nil {
		return &Charger{}
	}
	return start(m, cpu, threads, kernelTarget{k}, warnf, func(string, ...interface{}) {}, "cpu-charge: ")
}

// kernelTarget charges a Kernel.
type kernelTarget struct{ k Kernel }

func (kernelTarget) open() error { return nil }

func (t kernelTarget) charge(us uint64) error { return t.k.Charge(us) }

func (t kernelTarget) debt() ([]debt, bool) {
	var d debt
	d.outstanding, d.deducted, d.quota, d.period = t.k.Debt()
	return []debt{d}, d.quota > 0
}

func (kernelTarget) close() {}

// newCharger builds a charger from its parts; run starts it.
func newCharger(cpu cpuSource, t target, clk clock, warnf func(string, ...interface{})) *Charger {
	return &Charger{
		cpu:      cpu,
		target:   t,
		clock:    clk,
		warnf:    warnf,
		debugf:   func(string, ...interface{}) {},
		started:  clk.Now(),
		interval: minInterval,
		selfCost: -1,
		warned:   map[string]bool{},
		wake:     make(chan struct{}, 1),
	}
}

func (c *Charger) run() {
	c.stop = make(chan struct{})
	c.done = make(chan struct{})
	go c.loop()
}

// TrackThread charges the calling goroutine's OS thread, in thread mode;
// in the other modes it does nothing. Call it at the start of every
// goroutine that copies or encodes the container's output (a driver's
// per-stream goroutines too) as "defer charger.TrackThread()()".
func (c *Charger) TrackThread() (untrack func()) {
	if c == nil || c.threads == nil {
		return func() {}
	}
	return c.threads.track()
}

// Stop charges what is left and stops. Call it once the logs are copied.
func (c *Charger) Stop() {
	if c == nil || c.stop == nil {
		return
	}
	c.once.Do(func() { close(c.stop) })
	<-c.done
}

// Pace returns at once unless the container owes more than one period's
// quota (process mode); then it waits until that is paid. The copying
// goroutines call it before each line they take from the container.
//
// It also wakes an idle charger: a line taken is the activity it waits for.
func (c *Charger) Pace() {
	if c == nil {
		return
	}
	c.lines.Add(1)
	if c.sleeping.Load() && c.sleeping.CompareAndSwap(true, false) {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	if !c.paused.Load() {
		return
	}
	c.mu.Lock()
	ch := c.resume
	c.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// StopPacing releases the copying goroutines for good. The logging process
// calls it on SIGTERM: the shim sends it when the task is deleted, right
// after closing its ends of the pipes, so what is still in them is the
// container's last output, which must be read now, not at the pace of a
// debt that will never be paid (the container is gone).
func (c *Charger) StopPacing() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.noPace = true
	c.freeQueue.Store(true)
	if c.resume != nil {
		close(c.resume)
		c.resume = nil
	}
	c.paused.Store(false)
}

const (
	// pacedQueueLen is the length of the driver's side of a stream's
	// queue where the logger paces (Relay): what is queued is copied even
	// while the reader waits, and a stock queue (10000 lines) takes
	// seconds to copy under emulation, far ahead of what the container
	// pays.
	pacedQueueLen = 64
	// relayBatch is how many lines a reader held by WaitQueue queues
	// before it waits for the relay to take them all: one wait per batch,
	// not one per line.
	relayBatch = 32
	// queuePoll is how often a reader held by WaitQueue looks again at
	// the bound itself (lifted meanwhile); lines taken wake it at once.
	queuePoll = 100 * time.Millisecond
)

// Relay returns the channel the driver takes a stream's lines from, given
// the one its reader sends them to (in, of the stock length): in itself
// where the logger does not pace; in process mode a channel of
// pacedQueueLen lines that a goroutine of its own fills from in, in order,
// telling WaitQueue of each line it takes. It closes the driver's channel
// after in is closed and empty.
//
// WaitQueue needs to know when the driver makes room: a reader that
// polled the queue's length slept a timer's granularity (a millisecond or
// more) each time the driver had emptied it, and a flooding container's
// logger then ran at about a third of a CPU where the container's quota
// paid for half.
func (c *Charger) Relay(in chan string) <-chan string {
	if c == nil || !c.pace {
		return in
	}
	out := make(chan string, pacedQueueLen)
	took := c.addRelay(in)
	go func() {
		defer close(out)
		for line := range in {
			out <- line
			select {
			case took <- struct{}{}:
			default:
			}
		}
	}()
	return out
}

// addRelay records in as a relayed stream and returns the channel its
// relay tells of each line it takes (one wakeup held at most).
func (c *Charger) addRelay(in chan string) chan struct{} {
	took := make(chan struct{}, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.relays == nil {
		c.relays = map[chan string]chan struct{}{}
	}
	c.relays[in] = took
	return took
}

// WaitQueue makes a copying goroutine that has queued relayBatch lines in
// in (its stream's channel, which Relay empties) wait until the relay has
// taken them all, in process mode while the queue is bounded: from the
// start until the debt is first read, and for good from the first reading
// close to pacing (a level owing more than half of what paces; within the
// busy cadence, 10 ms, of a quiet container starting to flood). A bounded
// stream then holds at most pacedQueueLen lines for the driver and
// relayBatch for the relay. Where pacing never comes close (thread mode,
// no quota, a quiet container) and after StopPacing the queue is the
// stock one.
func (c *Charger) WaitQueue(in chan string) {
	if c == nil || !c.pace || len(in) < relayBatch || c.freeQueue.Load() {
		return
	}
	c.mu.Lock()
	took, poll := c.relays[in], c.queuePoll
	c.mu.Unlock()
	if took == nil {
		return // no relay: the driver takes from in itself
	}
	if poll <= 0 {
		poll = queuePoll
	}
	t := time.NewTimer(poll)
	defer t.Stop()
	for len(in) > 0 && !c.freeQueue.Load() {
		select {
		case <-took:
		case <-t.C:
			t.Reset(poll)
		}
	}
}

// setFreeQueue lifts the bound on the readers' queues (WaitQueue) or
// sets it again; never again once StopPacing was called.
func (c *Charger) setFreeQueue(free bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.freeQueue.Store(free || c.noPace)
}

// setPaused pauses or releases the copying goroutines.
func (c *Charger) setPaused(p bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p == c.paused.Load() || (p && c.noPace) {
		return
	}
	if p {
		c.resume = make(chan struct{})
		c.pauses++
	} else {
		close(c.resume)
		c.resume = nil
	}
	c.paused.Store(p)
}

// paceAt is the debt above which the logger waits: one period's quota. The
// kernel keeps about a second's quota, but never less than one period's:
// with periods of half a second or more, that bound is within one or two
// periods' quota, so the logger waits from half of one.
func (d debt) paceAt() uint64 {
	if d.period >= 500000 {
		return d.quota / 2
	}
	return d.quota
}

// owed returns what this logger's container owes at the level of d: all
// of the container's own cgroup's debt; of an ancestor's, the part that
// this logger's charges make up. An ancestor pays its debt as a whole, so
// each part is taken to shrink in proportion: between two readings the
// level took in what was charged to it (borrowed grew), this logger's
// charges among it, and paid or dropped the rest of the change.
//
// What the logger charged while it waited (its own wakeups to watch the
// debt) is charged but not added to its part: a part shrinks only as fast
// as the whole debt is paid, and where a sibling keeps that debt large, a
// waiting logger's own costs would otherwise keep its part above the
// threshold, and its lines waiting, for as long as the sibling goes on.
func (c *Charger) owed(d debt) uint64 {
	if d.level == 0 {
		return d.outstanding
	}
	s := c.shares[d.level]
	switch {
	case d.borrowed == 0 && d.outstanding > 0:
		// No count of what was charged (a kernel without it): all of it.
		return d.outstanding
	case s == nil || d.borrowed < s.borrowed:
		// The first reading (or the level made again): none of this
		// logger's charges is taken as paid yet.
		if c.shares == nil {
			c.shares = map[int]*share{}
		}
		s = &share{owed: min(c.charged, d.outstanding)}
		c.shares[d.level] = s
	default:
		in := d.borrowed - s.borrowed
		ours := min(c.charged-s.charged, in)
		if c.paused.Load() {
			ours = 0 // charged while waiting: see above
		}
		before := s.outstanding + in
		owed := s.owed + ours
		if before > d.outstanding && before > 0 {
			// Paid or dropped since: each part in proportion.
			owed -= uint64(float64(owed) * float64(before-d.outstanding) / float64(before))
		}
		s.owed = min(owed, d.outstanding)
	}
	s.borrowed, s.outstanding, s.charged = d.borrowed, d.outstanding, c.charged
	return s.owed
}

// updatePace pauses the logger while the container's debt exceeds one
// period's quota and is being paid.
func (c *Charger) updatePace() {
	ds, ok := c.target.debt()
	now := c.clock.Now()
	// A charge is paid by the container's cgroup and by each ancestor
	// with a quota: the logger waits while the container owes any of them
	// more than one of its periods' quota.
	var deducted, period uint64
	over, near := false, false
	for _, d := range ds {
		deducted += d.deducted
		if d.period > period {
			period = d.period
		}
		owed := c.owed(d)
		over = over || (d.quota > 0 && owed > d.paceAt())
		near = near || (d.quota > 0 && owed > d.paceAt()/2)
	}
	// Once close to pacing, the queues stay bounded: a flood pays its
	// debt down and up again, and a stock queue filled whenever it is
	// low would be copied ahead of the payments every time.
	c.nearPace = c.nearPace || (ok && near)
	c.setFreeQueue(!c.nearPace)
	// Did a period pay something since the last reading? (The kernel's
	// count of deducted time: the debt itself also moves when the kernel
	// drops charges beyond its bound.)
	if ok && c.haveDebt && deducted > c.lastDeducted {
		c.progress, c.stalled = now, false
	}
	c.lastDeducted, c.haveDebt = deducted, ok
	over = ok && over
	stall := 3 * time.Duration(period) * time.Microsecond
	if stall < minStall {
		stall = minStall
	}
	switch {
	case !over:
		c.setPaused(false)
	case !c.paused.Load():
		if !c.stalled {
			c.progress = now
			c.setPaused(true)
		}
	case now.Sub(c.progress) > stall:
		// No period has paid anything: the container is not running (its
		// tasks exited, or it is frozen). Waiting would hold up its last
		// lines for nothing; wait again once payments resume.
		c.stalled = true
		c.setPaused(false)
	}
	if c.paused.Load() {
		c.interval = c.busyInterval() // notice the payment soon
	}
}

func (c *Charger) loop() {
	defer close(c.done)
	defer c.target.close()
	defer c.setPaused(false) // never leave the copying goroutines waiting
	defer c.setFreeQueue(true)
	for {
		// Idle (backed off to the longest interval, not waiting on a
		// debt): no wakeup until the next line. What the process uses
		// meanwhile (the Go runtime's background work) is charged then,
		// or by the final flush.
		var fire <-chan time.Time
		var t timer
		if c.wakeOnRead && c.opened && c.interval >= maxInterval && !c.paused.Load() {
			c.sleeping.Store(true)
		} else {
			t = c.clock.NewTimer(c.interval)
			fire = t.C()
		}
		select {
		case <-c.stop:
			if t != nil {
				t.Stop()
			}
			c.sleeping.Store(false)
			c.tick(true) // the final flush
			return
		case <-fire:
		case <-c.wake:
		}
		if !c.tick(false) {
			return // charging stopped for good: no more wakeups
		}
	}
}

// expected reports the errors that say charging cannot work here, which are
// no reason for a warning: a kernel without the file, a cgroup without the
// cpu controller or without any quota on its path, the container gone, a
// logging process that may not charge.
func expected(err error) bool {
	for _, e := range []error{errNoFile, errNoCPU, errNoQuota, errCgroupGone} {
		if errors.Is(err, e) {
			return true
		}
	}
	return refused(err)
}

// refused reports a charge the kernel does not allow this process, now or
// later: one that it could not make by moving itself into the container's
// cgroup (rootless outside the user's delegated subtree, a cgroup v1 host
// without CAP_SYS_ADMIN), or a read-only cgroup filesystem.
func refused(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// busyInterval is the cadence while the logger works: minInterval, or 20
// wakeups' cost when that is longer, at most maxInterval.
func (c *Charger) busyInterval() time.Duration {
	if c.threads != nil {
		// Thread mode does not pace: no payment to notice soon, and a
		// charge is paid in the next periods whether it is written every
		// 10 ms or every 100 ms. The charger's own wakeups are not
		// charged in that mode: fewer of them.
		return maxInterval
	}
	d := 20 * c.selfCost
	if d < minInterval {
		return minInterval
	}
	if d > maxInterval {
		return maxInterval
	}
	return d
}

// nextInterval: back to the fast cadence on any activity, else double.
//
// In process mode the charger measures its own wakeups too: the Go
// runtime's work to wake it and put it back to sleep costs a few hundred µs
// of CPU time in a VM (more under emulation), more than a fixed threshold
// would allow for an idle logger. That cost is about the same at every
// wakeup, whatever the interval, and it is the least CPU time a tick sees
// (the ticks while runc creates the container are idle, and so are those of
// a quiet container): activity is what goes beyond it, with a margin for
// its jitter.
//
// The busy cadence is 10 ms, or longer where a wakeup is so expensive (an
// emulated CPU) that the charger would cost more than 5% of a CPU.
func (c *Charger) nextInterval(used time.Duration) time.Duration {
	if used < c.selfCost || c.selfCost < 0 {
		c.selfCost = used
	}
	if used >= 2*c.selfCost+idleThreshold {
		return c.busyInterval()
	}
	if next := 2 * c.interval; next < maxInterval {
		return next
	}
	return maxInterval
}

// nextIntervalByLines is nextInterval where the copying goroutines report
// each line (wakeOnRead): activity is a line taken, not CPU time beyond the
// charger's own. Under emulation a wakeup's cost varies so much that the
// CPU time of an idle interval often looks like work, and the fast cadence
// it brings back would sustain itself.
func (c *Charger) nextIntervalByLines(used time.Duration) time.Duration {
	if used < c.selfCost || c.selfCost < 0 {
		c.selfCost = used
	}
	if c.lines.Swap(0) > 0 {
		return c.busyInterval()
	}
	if next := 2 * c.interval; next < maxInterval {
		return next
	}
	return maxInterval
}

// tick samples the CPU clock and charges what was used since the last
// write, in whole microseconds: the remainder waits for the next tick, so
// nothing is lost or counted twice. It returns false when charging has
// stopped for good.
func (c *Charger) tick(final bool) bool {
	now := c.cpu.cpuTime()
	used := now - c.lastCPU
	if used < 0 {
		used = 0 // a clock read failed: take it up at the next sample
	} else {
		c.lastCPU = now
	}
	c.pending += used
	if c.wakeOnRead {
		c.interval = c.nextIntervalByLines(used)
	} else {
		c.interval = c.nextInterval(used)
	}

	if !c.opened {
		err := c.target.open()
		switch {
		case err == nil:
			c.opened = true
		case errors.Is(err, errNotYet):
			// The CPU used meanwhile stays pending and is charged as
			// soon as the cgroup exists: look often, the runtime makes
			// it within milliseconds, and a short-lived container's is
			// removed soon after.
			if waited := c.clock.Now().Sub(c.started); !final && waited < resolveTimeout {
				c.interval = minInterval
				if waited >= fastResolve {
					c.interval = maxInterval
				}
				return true
			}
			if final {
				c.debugf("%sthe logs are copied and the container's cgroup was never set up (%v): %v not charged", c.prefix, err, c.pending.Round(time.Microsecond))
			} else {
				c.warnf("%s%v after %v; not charging", c.prefix, err, c.clock.Now().Sub(c.started).Round(time.Millisecond))
			}
			return false
		case expected(err):
			c.debugf("%s%v; not charging (%v not charged)", c.prefix, err, c.pending.Round(time.Microsecond))
			return false
		default:
			c.warnf("%s%v; not charging", c.prefix, err)
			return false
		}
	}

	us := uint64(c.pending / time.Microsecond)
	var err error
	if us > 0 {
		// Charged or dropped, the amount leaves pending: a failing write
		// must not make it grow without bound.
		c.pending -= time.Duration(us) * time.Microsecond
		if err = c.target.charge(us); err == nil {
			c.charged += us
		}
	}
	// The pace is decided anew at every tick that charged something or
	// finds the logger waiting, whatever happened to the write: a failed
	// write releases the copying goroutines (a debt that cannot be read
	// or added to is no reason to hold up the logs).
	if c.pace && !final && (us > 0 || c.paused.Load()) {
		if err != nil {
			c.setPaused(false)
			c.setFreeQueue(true)
		} else {
			c.updatePace()
		}
	}
	if err == nil {
		return true
	}
	c.dropped += us
	switch {
	case errors.Is(err, errCgroupGone):
		c.debugf("%s%v (the task was deleted); stopped charging, %d µs not charged", c.prefix, err, us)
		return false
	case refused(err):
		c.debugf("%snot allowed to charge (%v); stopped charging, %d µs not charged", c.prefix, err, us)
		return false
	}
	kind := err.Error()
	var errno syscall.Errno
	if errors.As(err, &errno) {
		kind = errno.Error()
	}
	if !c.warned[kind] {
		c.warned[kind] = true
		c.warnf("%sdropped %d µs: %v (said once for this error)", c.prefix, us, err)
	}
	return true
}
