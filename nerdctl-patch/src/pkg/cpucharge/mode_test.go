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
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": ModeProcess, "process": ModeProcess, "thread": ModeThread, "off": ModeOff} {
		got, err := ParseMode(in)
		assert.Check(t, err, "ParseMode(%q)", in)
		assert.Check(t, is.Equal(got, want), "ParseMode(%q)", in)
		if in != "" {
			assert.Check(t, is.Equal(got.String(), in))
		}
	}
	for _, in := range []string{"Process", "threads", " off", "none", "0", "true"} {
		_, err := ParseMode(in)
		assert.Check(t, is.ErrorContains(err, "cpu-charge"), "ParseMode(%q): want an error that names the option", in)
	}
}

func TestSplitLogOpts(t *testing.T) {
	opts := map[string]string{"max-size": "10m", LogOpt: "thread"}
	rest, err := SplitLogOpts(opts)
	assert.NilError(t, err)
	assert.Check(t, is.DeepEqual(rest, map[string]string{"max-size": "10m"}), "driver options: want only max-size")
	assert.Check(t, is.Equal(opts[LogOpt], "thread"), "SplitLogOpts changed its argument: %v", opts)
	_, err = SplitLogOpts(map[string]string{LogOpt: "bogus"})
	assert.Check(t, err != nil, "an invalid cpu-charge passed")
	rest, err = SplitLogOpts(map[string]string{"tag": "x"})
	assert.Check(t, err, "without cpu-charge")
	assert.Check(t, is.Equal(rest["tag"], "x"), "without cpu-charge: %v", rest)
}

func TestSetDefaultLogOpt(t *testing.T) {
	// The container's own choice wins over the global default.
	opts, err := SetDefaultLogOpt(map[string]string{LogOpt: "off"}, "thread")
	assert.Check(t, err, "per-container")
	assert.Check(t, is.Equal(opts[LogOpt], "off"), "per-container: %v", opts)
	opts, err = SetDefaultLogOpt(map[string]string{"tag": "x"}, "thread")
	assert.Check(t, err, "global default")
	assert.Check(t, is.Equal(opts[LogOpt], "thread"), "global default: %v", opts)
	assert.Check(t, is.Equal(opts["tag"], "x"), "global default: %v", opts)
	opts, err = SetDefaultLogOpt(nil, "")
	assert.Check(t, err, "no default")
	assert.Check(t, is.Equal(opts[LogOpt], "process"), "no default: %v", opts)
	_, err = SetDefaultLogOpt(nil, "threads")
	assert.Check(t, is.ErrorContains(err, "log_cpu_charge"), "invalid global default")
	// An invalid global default does not matter to a container that chose.
	_, err = SetDefaultLogOpt(map[string]string{LogOpt: "off"}, "threads")
	assert.Check(t, err, "chosen mode with an invalid default")
}

func TestModeFromLogOpts(t *testing.T) {
	assert.Check(t, is.Equal(ModeFromLogOpts(map[string]string{LogOpt: "off"}, "thread"), ModeOff), "cpu-charge=off")
	assert.Check(t, is.Equal(ModeFromLogOpts(nil, ""), DefaultMode), "no option, no configured default")
	// A container created before the upgrade: the configured default.
	for _, def := range []string{"off", "thread"} {
		m := ModeFromLogOpts(map[string]string{"max-size": "1m"}, def)
		assert.Check(t, is.Equal(m.String(), def), "no option, configured %q", def)
	}
	assert.Check(t, is.Equal(ModeFromLogOpts(map[string]string{LogOpt: "bogus"}, "off"), DefaultMode), "invalid option")
	assert.Check(t, is.Equal(ModeFromLogOpts(nil, "bogus"), DefaultMode), "invalid configured default")
}
