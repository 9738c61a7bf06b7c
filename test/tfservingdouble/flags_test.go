package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/modelserver-dev/modelserver-operator/internal/servingflags"
)

func TestTheDoubleSaysWhatItDoesWithEveryFlag(t *testing.T) {
	var names []string
	for _, s := range servingflags.All() {
		names = append(names, s.Name)
		if _, ok := doubleFlags[s.Name]; !ok {
			t.Errorf("flag %s: the double does not say what it does with it", s.Name)
		}
	}
	for name := range doubleFlags {
		if !slices.Contains(names, name) {
			t.Errorf("the double describes --%s, which tensorflow_model_server lacks", name)
		}
	}
}

func TestEveryRealFlagIsAccepted(t *testing.T) {
	for _, s := range servingflags.All() {
		if _, err := parseFlags([]string{"--" + s.Name + "=" + s.Default}); err != nil {
			t.Errorf("--%s=%s refused: %v", s.Name, s.Default, err)
		}
	}
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		// want maps flags to their parsed values; err is a part of the
		// refusal, usage whether the usage text follows.
		want  map[string]string
		err   string
		usage bool
	}{
		{name: "the operator's command line", args: []string{
			"--port=8500", "--rest_api_port=8501", "--model_config_file=/etc/modelserver/models.config",
			"--model_config_file_poll_wait_seconds=30", "--allow_version_labels_for_unavailable_models=true",
			"--enable_batching=true", "--batching_parameters_file=/etc/modelserver/batching.config",
			"--monitoring_config_file=/etc/modelserver/monitoring.config",
		}, want: map[string]string{"port": "8500", "rest_api_port": "8501", "model_config_file_poll_wait_seconds": "30",
			"allow_version_labels_for_unavailable_models": "true", "enable_batching": "true",
			"monitoring_config_file": "/etc/modelserver/monitoring.config"}},
		{name: "bare boolean", args: []string{"--enable_batching"}, want: map[string]string{"enable_batching": "true"}},
		{name: "booleans in any case, and 0/1", args: []string{"--enable_batching=True", "--enable_model_warmup=0", "--flush_filesystem_caches=FALSE"},
			want: map[string]string{"enable_batching": "true", "enable_model_warmup": "false", "flush_filesystem_caches": "false"}},
		{name: "the last value wins", args: []string{"--port=1", "--port=2"}, want: map[string]string{"port": "2"}},
		{name: "a value may contain =", args: []string{"--grpc_channel_arguments=a=1,b=2"}, want: map[string]string{"grpc_channel_arguments": "a=1,b=2"}},
		{name: "leading blanks and a sign", args: []string{"--port= +8500"}, want: map[string]string{"port": "8500"}},
		{name: "an empty string", args: []string{"--model_name="}, want: map[string]string{"model_name": ""}},
		{name: "float", args: []string{"--per_process_gpu_memory_fraction=0.5"}, want: map[string]string{"per_process_gpu_memory_fraction": "0.5"}},

		{name: "unknown flag", args: []string{"--port=8500", "--model_dir=/models"}, err: "ERROR: unknown command line flag 'model_dir'"},
		{name: "unknown bare flag", args: []string{"--enable_everything"}, err: "ERROR: unknown command line flag 'enable_everything'"},
		{name: "a flag's prefix is unknown", args: []string{"--model_config=/x"}, err: "ERROR: unknown command line flag 'model_config'"},
		{name: "single dash", args: []string{"-port=8500"}, err: "unexpected argument '-port=8500'"},
		{name: "positional argument", args: []string{"serve"}, err: "unexpected argument 'serve'"},
		{name: "separated value", args: []string{"--port", "8500"}, err: "flag 'port' needs a value"},
		{name: "double dash", args: []string{"--"}, err: "unexpected argument '--'"},
		{name: "int out of range", args: []string{"--port=99999999999"}, err: "Couldn't interpret value 99999999999 for flag port.", usage: true},
		{name: "not an int", args: []string{"--rest_api_port=http"}, err: "Couldn't interpret value http for flag rest_api_port.", usage: true},
		{name: "trailing garbage", args: []string{"--port=8500 "}, err: "for flag port", usage: true},
		{name: "not a bool", args: []string{"--enable_batching=yes"}, err: "for flag enable_batching", usage: true},
		{name: "help", args: []string{"--help"}, usage: true, err: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseFlags(tc.args)
			if tc.err != "" || tc.usage {
				fe, ok := err.(*flagError)
				if !ok {
					t.Fatalf("parseFlags(%q) = %v, %v; want refusal %q", tc.args, got, err, tc.err)
				}
				if !strings.Contains(fe.msg, tc.err) || fe.showUsage != tc.usage {
					t.Errorf("refusal %q (usage %v), want %q (usage %v)", fe.msg, fe.showUsage, tc.err, tc.usage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want {
				if got.raw(k) != v {
					t.Errorf("%s = %q, want %q", k, got.raw(k), v)
				}
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	o := flags{}.options()
	if o.grpcPort != 8500 || o.restPort != 0 || o.modelName != "default" || o.fsPollSeconds != 1 || o.configPollSeconds != 0 || o.allowUnavailableLabels {
		t.Errorf("defaults differ from tensorflow_model_server's: %+v", o)
	}
}

func TestRunRefusesCommandLines(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{[]string{"--port=8500", "--frobnicate=1"}, 1, "", "ERROR: unknown command line flag 'frobnicate'\n"},
		{[]string{"--port=x"}, 255, "usage: tensorflow_model_server", "Couldn't interpret value x for flag port."},
		{[]string{"--help"}, 255, "--model_config_file_poll_wait_seconds=0", ""},
		{[]string{"--version"}, 0, "TensorFlow ModelServer: 0.0.0-tfservingdouble", ""},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("run(%q) = %d\nstdout: %s\nstderr: %s\nwant %d, stdout with %q, stderr with %q", tc.args, code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
		}
	}
}
