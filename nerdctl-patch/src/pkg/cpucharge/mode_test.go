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
	"strings"
	"testing"
)

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": ModeProcess, "process": ModeProcess, "thread": ModeThread, "off": ModeOff} {
		got, err := ParseMode(in)
		if err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", in, got, err, want)
		}
		if in != "" && got.String() != in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), in)
		}
	}
	for _, in := range []string{"Process", "threads", " off", "none", "0", "true"} {
		if _, err := ParseMode(in); err == nil || !strings.Contains(err.Error(), "cpu-charge") {
			t.Errorf("ParseMode(%q): err = %v, want an error that names the option", in, err)
		}
	}
}

func TestSplitLogOpts(t *testing.T) {
	opts := map[string]string{"max-size": "10m", LogOpt: "thread"}
	rest, err := SplitLogOpts(opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != 1 || rest["max-size"] != "10m" {
		t.Errorf("driver options = %v, want only max-size", rest)
	}
	if opts[LogOpt] != "thread" {
		t.Errorf("SplitLogOpts changed its argument: %v", opts)
	}
	if _, err := SplitLogOpts(map[string]string{LogOpt: "bogus"}); err == nil {
		t.Error("an invalid cpu-charge passed")
	}
	if rest, err := SplitLogOpts(map[string]string{"tag": "x"}); err != nil || rest["tag"] != "x" {
		t.Errorf("without cpu-charge: %v, %v", rest, err)
	}
}

func TestSetDefaultLogOpt(t *testing.T) {
	// The container's own choice wins over the global default.
	opts, err := SetDefaultLogOpt(map[string]string{LogOpt: "off"}, "thread")
	if err != nil || opts[LogOpt] != "off" {
		t.Errorf("per-container: %v, %v", opts, err)
	}
	opts, err = SetDefaultLogOpt(map[string]string{"tag": "x"}, "thread")
	if err != nil || opts[LogOpt] != "thread" || opts["tag"] != "x" {
		t.Errorf("global default: %v, %v", opts, err)
	}
	opts, err = SetDefaultLogOpt(nil, "")
	if err != nil || opts[LogOpt] != "process" {
		t.Errorf("no default: %v, %v", opts, err)
	}
	if _, err := SetDefaultLogOpt(nil, "threads"); err == nil || !strings.Contains(err.Error(), "log_cpu_charge") {
		t.Errorf("invalid global default: err = %v", err)
	}
	// An invalid global default does not matter to a container that chose.
	if _, err := SetDefaultLogOpt(map[string]string{LogOpt: "off"}, "threads"); err != nil {
		t.Errorf("chosen mode with an invalid default: %v", err)
	}
}

func TestModeFromLogOpts(t *testing.T) {
	if m := ModeFromLogOpts(map[string]string{LogOpt: "off"}, "thread"); m != ModeOff {
		t.Errorf("cpu-charge=off: %v", m)
	}
	if m := ModeFromLogOpts(nil, ""); m != DefaultMode {
		t.Errorf("no option, no configured default: %v, want %v", m, DefaultMode)
	}
	// A container created before the upgrade: the configured default.
	for _, def := range []string{"off", "thread"} {
		if m := ModeFromLogOpts(map[string]string{"max-size": "1m"}, def); m.String() != def {
			t.Errorf("no option, configured %q: %v", def, m)
		}
	}
	if m := ModeFromLogOpts(map[string]string{LogOpt: "bogus"}, "off"); m != DefaultMode {
		t.Errorf("invalid option: %v, want %v", m, DefaultMode)
	}
	if m := ModeFromLogOpts(nil, "bogus"); m != DefaultMode {
		t.Errorf("invalid configured default: %v, want %v", m, DefaultMode)
	}
}
