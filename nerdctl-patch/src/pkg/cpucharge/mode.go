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

	"github.com/containerd/log"
)

// LogOpt is the log option that selects the mode for one container:
// --log-opt cpu-charge=process|thread|off. It is valid for every logging
// driver, since the charging is done by the logging process, not by a driver.
const LogOpt = "cpu-charge"

// Mode selects what CPU time the logging process charges to its container.
type Mode int

const (
	// ModeProcess charges all the CPU time of the logging process, all its
	// threads (the readers, the driver, the Go runtime and the charger).
	ModeProcess Mode = iota
	// ModeThread charges only the CPU time of the threads that copy and
	// encode the logs (the readers, the driver and the goroutines the
	// driver starts per stream, each locked to its own thread while it
	// runs), as the paper this comes from did. It misses what the Go
	// runtime does for them on other threads (the scheduler's hand-offs
	// between the locked threads, garbage collection) and the charger's
	// own work; it is kept for comparisons: ModeProcess is the one to use.
	ModeThread
	// ModeOff charges nothing and costs nothing: no goroutine, no timer.
	ModeOff
)

// DefaultMode is the mode of a container that did not choose one, when
// nerdctl.toml does not set log_cpu_charge either.
const DefaultMode = ModeProcess

var modeNames = map[Mode]string{ModeProcess: "process", ModeThread: "thread", ModeOff: "off"}

func (m Mode) String() string {
	if s, ok := modeNames[m]; ok {
		return s
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode parses "process", "thread" or "off". The empty string is
// DefaultMode: the option was not given.
func ParseMode(s string) (Mode, error) {
	if s == "" {
		return DefaultMode, nil
	}
	for m, name := range modeNames {
		if s == name {
			return m, nil
		}
	}
	return DefaultMode, fmt.Errorf("invalid %s %q: must be \"process\", \"thread\" or \"off\"", LogOpt, s)
}

// SplitLogOpts checks the cpu-charge option of a container's log options
// and returns the other options. Drivers check their options themselves and
// warn about those they do not know, so they must not see this one.
func SplitLogOpts(opts map[string]string) (map[string]string, error) {
	v, ok := opts[LogOpt]
	if !ok {
		return opts, nil
	}
	if _, err := ParseMode(v); err != nil {
		return nil, err
	}
	rest := make(map[string]string, len(opts)-1)
	for k, v := range opts {
		if k != LogOpt {
			rest[k] = v
		}
	}
	return rest, nil
}

// SetDefaultLogOpt records the mode in a container's log options when the
// container did not choose one: def is the global default (log_cpu_charge
// in nerdctl.toml, or "" for DefaultMode). Recording it at create time
// keeps the container's mode when the global default changes later.
func SetDefaultLogOpt(opts map[string]string, def string) (map[string]string, error) {
	if _, ok := opts[LogOpt]; ok {
		return opts, nil
	}
	m, err := ParseMode(def)
	if err != nil {
		return nil, fmt.Errorf("invalid default log_cpu_charge (nerdctl.toml or --log-cpu-charge): %w", err)
	}
	if opts == nil {
		opts = make(map[string]string, 1)
	}
	opts[LogOpt] = m.String()
	return opts, nil
}

// ModeFromLogOpts returns the mode that a container's log options select.
// A container created before nerdctl recorded a mode in them (an older
// nerdctl) gets def, the configured global default (log_cpu_charge in
// nerdctl.toml; "" for DefaultMode). nerdctl run and create reject invalid
// values; one that is there anyway (a hand-edited log-config.json or
// nerdctl.toml) gets a warning and DefaultMode, because the logs must flow
// whatever the charging does.
func ModeFromLogOpts(opts map[string]string, def string) Mode {
	v, ok := opts[LogOpt]
	if !ok {
		v = def
	}
	m, err := ParseMode(v)
	if err != nil {
		log.L.WithError(err).Warnf("cpu-charge: using the default %q", DefaultMode)
		return DefaultMode
	}
	return m
}
