package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

func init() { bindHost = "127.0.0.1" }

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// running is a double started by run, as the container starts it.
type running struct {
	cancel         context.CancelFunc
	done           chan int
	stdout, stderr *syncBuffer
	rest           string
}

func startDouble(t *testing.T, ctx context.Context, restPort int, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	r := &running{cancel: cancel, done: make(chan int, 1), stdout: &syncBuffer{}, stderr: &syncBuffer{}, rest: fmt.Sprintf("http://127.0.0.1:%d", restPort)}
	go func() { r.done <- run(ctx, args, r.stdout, r.stderr) }()
	t.Cleanup(func() {
		r.cancel()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			t.Error("the double did not stop")
		}
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		}
	})
	return r
}

// get is a GET as a probe or client sends it: status and body, or -1 if
// nothing listens.
func get(url string) (int, string) {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		return -1, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func eventually(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTheOperatorsServingContainer runs the double with the exact
// arguments and files the operator renders for a ModelServer, its paths
// moved under a temporary directory, and asks what the probes and a
// client ask.
func TestTheOperatorsServingContainer(t *testing.T) {
	half := testModels(t, "saved_model_half_plus_two_2_versions")
	ms := &servingv1alpha1.ModelServer{
		ObjectMeta: metav1.ObjectMeta{Name: "half", Namespace: "ml", UID: "uid-1"},
		Spec: servingv1alpha1.ModelServerSpec{
			Model:    &servingv1alpha1.ModelSpec{StorageURI: "s3://models/half"},
			Replicas: ptr.To[int32](1),
			Batching: &servingv1alpha1.Batching{MaxBatchSize: 8, AllowedBatchSizes: []int32{4, 8}},
		},
	}
	v, err := values.For(ms, values.Inputs{ChartVersion: "0.1.0", AppVersion: "2.19.1", FetchImage: "example.com/op:1", Served: map[string]string{"half": "gen00001"}})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	etc, models := filepath.Join(root, "etc"), filepath.Join(root, "models")
	for name, content := range v.ConfigFiles {
		writeFile(t, filepath.Join(etc, name), strings.ReplaceAll(content, `base_path: "/models/`, `base_path: "`+models+`/`))
	}
	if err := os.MkdirAll(models, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(half, filepath.Join(models, strings.TrimPrefix(v.Models[0].BasePath, "/models/"))); err != nil {
		t.Fatal(err)
	}
	grpcPort, restPort := freePort(t), freePort(t)
	var args []string
	for _, a := range v.Serving.Args {
		a = strings.ReplaceAll(a, values.ConfigMountPath, etc)
		a = strings.Replace(a, fmt.Sprintf("--port=%d", v.Serving.GRPCPort), fmt.Sprintf("--port=%d", grpcPort), 1)
		a = strings.Replace(a, fmt.Sprintf("--rest_api_port=%d", v.Serving.RESTPort), fmt.Sprintf("--rest_api_port=%d", restPort), 1)
		// As the kubelet expands the container's CPU limit, here the
		// node's two cores.
		a = strings.ReplaceAll(a, "$("+values.CPULimitEnv+")", "2")
		args = append(args, a)
	}
	for _, want := range []string{"--enable_batching=true", "--monitoring_config_file=" + etc + "/" + values.MonitoringConfigFile, "--allow_version_labels_for_unavailable_models=true"} {
		if !strings.Contains(strings.Join(args, " "), want) {
			t.Fatalf("the operator no longer passes %s: %q", want, args)
		}
	}

	d := startDouble(t, context.Background(), restPort, args...)
	readiness := d.rest + v.Serving.ReadinessPath
	eventually(t, "readiness", 10*time.Second, func() bool { code, _ := get(readiness); return code == 200 })
	if code, body := get(readiness); !strings.Contains(body, `"version": "124"`) || !strings.Contains(body, `"state": "AVAILABLE"`) {
		t.Errorf("readiness: %d %s", code, body)
	}
	if conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", grpcPort)); err != nil {
		t.Errorf("liveness (TCP on the gRPC port): %v", err)
	} else {
		_ = conn.Close()
	}
	resp, err := http.Post(d.rest+"/v1/models/half:predict", "application/json", strings.NewReader(`{"instances": [1.0, 2.0, 5.0]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "2.5,\n        3.0,\n        4.5") {
		t.Errorf("predict: %d %s", resp.StatusCode, body)
	}
	if code, body := get(d.rest + values.MonitoringPath); code != 200 || !strings.Contains(body, `:tensorflow:serving:request_count{model_name="half",status="OK"}`) {
		t.Errorf("metrics: %d %s", code, body)
	}

	d.cancel()
	if code := <-d.done; code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
	d.done <- 0
	for _, line := range []string{
		"Successfully loaded servable version {name: half version: 124}",
		fmt.Sprintf("Running gRPC ModelServer at 0.0.0.0:%d ...", grpcPort),
		fmt.Sprintf("Exporting HTTP/REST API at:localhost:%d ...", restPort),
	} {
		if !strings.Contains(d.stderr.String(), line) {
			t.Errorf("log lacks %q", line)
		}
	}
	if code, _ := get(readiness); code != -1 {
		t.Errorf("REST still answers after the double stopped: %d", code)
	}
}

// TestPortsOpenOnceTheModelsAreLoaded: like TF Serving, the double opens
// no port until its first config's models are loaded, so the startup
// probe (TCP on the REST port) fails until then.
func TestPortsOpenOnceTheModelsAreLoaded(t *testing.T) {
	base := t.TempDir()
	grpcPort, restPort := freePort(t), freePort(t)
	d := startDouble(t, context.Background(), restPort, "--model_name=m", "--model_base_path="+base,
		fmt.Sprintf("--port=%d", grpcPort), fmt.Sprintf("--rest_api_port=%d", restPort), "--file_system_poll_wait_seconds=1")
	eventually(t, "a poll that finds nothing", 5*time.Second, func() bool {
		return strings.Contains(d.stderr.String(), "No versions of servable m found under base path")
	})
	if code, body := get(d.rest + "/v1/models/m"); code != -1 {
		t.Fatalf("REST answers before the model is loaded: %d %s", code, body)
	}
	if _, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", grpcPort)); err == nil {
		t.Fatal("the gRPC port is open before the model is loaded")
	}
	addVersion(t, base, "00000001")
	eventually(t, "readiness", 5*time.Second, func() bool { code, _ := get(d.rest + "/v1/models/m"); return code == 200 })
	if !strings.Contains(d.stderr.String(), "Building single TensorFlow model file config:  model_name: m model_base_path: "+base) {
		t.Errorf("log:\n%s", d.stderr)
	}
}

// startServingM starts a double serving version 1 of model m on ports of
// its own, and returns it with its gRPC port.
func startServingM(t *testing.T) (*running, int) {
	t.Helper()
	base := t.TempDir()
	addVersion(t, base, "00000001")
	grpcPort, restPort := freePort(t), freePort(t)
	d := startDouble(t, context.Background(), restPort, "--model_name=m", "--model_base_path="+base,
		fmt.Sprintf("--port=%d", grpcPort), fmt.Sprintf("--rest_api_port=%d", restPort))
	return d, grpcPort
}

// TFSERVINGDOUBLE_GRPC_CLOSES_SECONDS closes the gRPC port, which the
// liveness probe dials, while the model still answers over REST: the
// probe alone sees the server fail.
func TestTheGRPCPortClosesWhileRESTStillAnswers(t *testing.T) {
	t.Setenv(grpcClosesEnv, "2")
	d, grpcPort := startServingM(t)
	dial := func() error {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", grpcPort), time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err
	}
	eventually(t, "readiness", 10*time.Second, func() bool { code, _ := get(d.rest + "/v1/models/m"); return code == 200 })
	if err := dial(); err != nil {
		t.Fatalf("the gRPC port is closed at once: %v", err)
	}
	eventually(t, "the gRPC port to close", 10*time.Second, func() bool { return dial() != nil })
	if code, body := get(d.rest + "/v1/models/m"); code != 200 {
		t.Errorf("REST after the gRPC port closed: %d %s", code, body)
	}
	select {
	case code := <-d.done:
		t.Fatalf("the double exited with %d when its gRPC port closed; want it running", code)
	default:
	}
}

// A slow first load (TFSERVINGDOUBLE_LOAD_SECONDS) keeps the ports closed
// after the models are loaded, as a large model's load keeps TF Serving's.
func TestASlowLoadKeepsThePortsClosed(t *testing.T) {
	t.Setenv(loadSecondsEnv, "3")
	d, _ := startServingM(t)
	eventually(t, "the load", 5*time.Second, func() bool {
		return strings.Contains(d.stderr.String(), "Successfully loaded servable version {name: m version: 1}")
	})
	if code, body := get(d.rest + "/v1/models/m"); code != -1 {
		t.Fatalf("REST answers before the slow load is over: %d %s", code, body)
	}
	eventually(t, "readiness", 10*time.Second, func() bool { code, _ := get(d.rest + "/v1/models/m"); return code == 200 })
}

// The variables that take seconds refuse anything else, naming themselves.
func TestSecondsThatAreNotANumberAreRefused(t *testing.T) {
	base := t.TempDir()
	addVersion(t, base, "00000001")
	for _, env := range []string{loadSecondsEnv, grpcClosesEnv} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "soon")
			var stderr bytes.Buffer
			if code := run(context.Background(), []string{"--model_name=m", "--model_base_path=" + base}, io.Discard, &stderr); code != 1 ||
				!strings.Contains(stderr.String(), env) {
				t.Errorf("%s=soon: exit %d, %q; want 1 and a message naming it", env, code, stderr.String())
			}
		})
	}
}

// TestTheModelConfigIsPolled writes new model configs while the double
// runs and sees them applied, and a malformed one ignored.
func TestTheModelConfigIsPolled(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	addVersion(t, a, "1")
	addVersion(t, a, "2")
	addVersion(t, b, "7")
	config := filepath.Join(t.TempDir(), "models.config")
	writeFile(t, config, modelList(model("a", a, "")))
	restPort := freePort(t)
	d := startDouble(t, context.Background(), restPort, "--model_config_file="+config, "--model_config_file_poll_wait_seconds=1",
		fmt.Sprintf("--port=%d", freePort(t)), fmt.Sprintf("--rest_api_port=%d", restPort), "--allow_version_labels_for_unavailable_models")
	eventually(t, "model a", 10*time.Second, func() bool { code, _ := get(d.rest + "/v1/models/a"); return code == 200 })
	if code, _ := get(d.rest + "/v1/models/b"); code != 404 {
		t.Errorf("b before it is configured: %d", code)
	}

	writeFile(t, config, modelList(
		model("a", a, `model_version_policy { specific { versions: 1 } } version_labels { key: "stable" value: 1 }`),
		model("b", b, "")))
	eventually(t, "model b", 10*time.Second, func() bool { code, _ := get(d.rest + "/v1/models/b"); return code == 200 })
	eventually(t, "a's new policy", 10*time.Second, func() bool {
		_, body := get(d.rest + "/v1/models/a/versions/2")
		return strings.Contains(body, `"state": "END"`)
	})
	if code, body := get(d.rest + "/v1/models/a/labels/stable/metadata"); code != 200 || !strings.Contains(body, `"version": "1"`) {
		t.Errorf("label stable: %d %s", code, body)
	}

	writeFile(t, config, "model_config_list { config { name: ")
	eventually(t, "the malformed config logged", 10*time.Second, func() bool {
		return strings.Contains(d.stderr.String(), "Failed to read ModelServerConfig file: Invalid protobuf file: '"+config+"'")
	})
	if code, _ := get(d.rest + "/v1/models/b"); code != 200 {
		t.Errorf("b after a malformed config: %d", code)
	}
	writeFile(t, config, modelList(model("a", a, "")))
	eventually(t, "b removed", 10*time.Second, func() bool {
		_, body := get(d.rest + "/v1/models/b")
		return strings.Contains(body, `"state": "END"`)
	})
}

func TestFailuresToStart(t *testing.T) {
	base := t.TempDir()
	addVersion(t, base, "1")
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, content)
		return p
	}
	good := "--model_config_file=" + file("good.config", modelList(model("m", base, "")))
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = busy.Close() }()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no model", []string{}, "INVALID_ARGUMENT: Both server_options.model_base_path and server_options.model_config_file are empty!"},
		{"no gRPC port", []string{"--port=0", good}, "At least one of server_options.grpc_port or server_options.grpc_socket_path must be set."},
		{"ALTS and SSL", []string{"--use_alts_credentials", "--ssl_config_file=/x", good}, "Either use_alts_credentials must be false or ssl_config_file must be empty."},
		{"missing config", []string{"--model_config_file=" + dir + "/missing"}, "NOT_FOUND: " + dir + "/missing; No such file or directory"},
		{"malformed config", []string{"--model_config_file=" + file("bad.config", "model_config_list { config { nme: \"m\" } }")},
			`INVALID_ARGUMENT: Invalid protobuf file: '` + dir + `/bad.config': error parsing text-format tensorflow.serving.ModelServerConfig: 1:30: Message type "tensorflow.serving.ModelConfig" has no field named "nme".`},
		{"duplicate models", []string{"--model_config_file=" + file("dup.config", modelList(model("m", base, ""), model("m", base, "")))}, "Illegal to list model m multiple times"},
		{"a label without the flag", []string{"--model_config_file=" + file("label.config", modelList(model("m", base, `version_labels { key: "stable" value: 1 }`)))},
			"FAILED_PRECONDITION: Request to assign label to version 1 of model m, which is not currently available for inference"},
		{"batching file without batching", []string{good, "--batching_parameters_file=" + file("batching.config", "")}, "server_options.batching_parameters_file is set without setting server_options.enable_batching to true."},
		{"malformed batching file", []string{good, "--enable_batching", "--batching_parameters_file=" + file("bad-batching.config", "max_batch_size: 8")}, `Expected "{" to start field "max_batch_size"`},
		{"every parallelism", []string{good, "--tensorflow_session_parallelism=1", "--tensorflow_intra_op_parallelism=1", "--tensorflow_inter_op_parallelism=1"}, "You cannot configure all."},
		{"malformed monitoring file", []string{good, fmt.Sprintf("--port=%d", freePort(t)), fmt.Sprintf("--rest_api_port=%d", freePort(t)), "--monitoring_config_file=" + file("monitoring.config", "prometheus_config { enable: 1.0 }")},
			`Invalid value for boolean field "enable"`},
		{"gRPC port taken", []string{good, fmt.Sprintf("--port=%d", busyPort)}, "Failed to BuildAndStart gRPC server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr := &syncBuffer{}, &syncBuffer{}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			code := run(ctx, tc.args, stdout, stderr)
			if code != 255 || !strings.Contains(stdout.String(), "Failed to start server. Error: "+tc.want) && !strings.Contains(stdout.String(), tc.want) {
				t.Errorf("exit %d\nstdout: %s\nstderr: %s\nwant 255 and %q", code, stdout, stderr, tc.want)
			}
		})
	}
}

func TestRESTPortProblemsAreNotFatal(t *testing.T) {
	base := t.TempDir()
	addVersion(t, base, "1")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = busy.Close() }()
	grpcPort := freePort(t)
	for _, tc := range []struct {
		rest int
		log  string
	}{
		{grpcPort, "server_options.http_port cannot be same as grpc_port. Please use a different port for HTTP/REST API. Skipped exporting HTTP/REST API."},
		{busy.Addr().(*net.TCPAddr).Port, "Failed to start HTTP Server at localhost:"},
	} {
		d := startDouble(t, context.Background(), tc.rest, "--model_base_path="+base, fmt.Sprintf("--port=%d", grpcPort), fmt.Sprintf("--rest_api_port=%d", tc.rest))
		eventually(t, "the gRPC port", 5*time.Second, func() bool {
			c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", grpcPort))
			if err == nil {
				_ = c.Close()
			}
			return err == nil
		})
		if !strings.Contains(d.stderr.String(), tc.log) {
			t.Errorf("log lacks %q:\n%s", tc.log, d.stderr)
		}
		d.cancel()
		if code := <-d.done; code != 0 {
			t.Errorf("exit %d", code)
		}
		d.done <- 0
	}
}

func TestSIGTERMDrainsAndExits(t *testing.T) {
	base := t.TempDir()
	addVersion(t, base, "1")
	ctx, stop := shutdownContext("", os.Getpid())
	defer stop()
	restPort := freePort(t)
	d := startDouble(t, ctx, restPort, "--model_base_path="+base, fmt.Sprintf("--port=%d", freePort(t)), fmt.Sprintf("--rest_api_port=%d", restPort))
	eventually(t, "readiness", 5*time.Second, func() bool { code, _ := get(d.rest + "/v1/models/default"); return code == 200 })
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-d.done:
		if code != 0 {
			t.Errorf("exit %d", code)
		}
		d.done <- code
	case <-time.After(5 * time.Second):
		t.Fatal("the double did not exit on SIGTERM")
	}
	if !strings.Contains(d.stderr.String(), "Received a termination signal") {
		t.Errorf("log:\n%s", d.stderr)
	}

	real, stopReal := shutdownContext("real", 12345)
	defer stopReal()
	if real.Err() != nil {
		t.Error("the real mode's context is done from the start")
	}
}
