package release

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
)

// BenchmarkFreshInstallAgainstTheAPIServer installs new releases, one
// after another, against a local control plane, and reports what each
// cost this process in CPU: the render, the requests and what is done
// with their responses, and the record. The apiserver runs in a process of
// its own, so its CPU is not counted; a run's wall time is mostly its.
//
//	go test ./internal/release -run '^$' -bench FreshInstallAgainstTheAPIServer -benchtime 500x -count 3
func BenchmarkFreshInstallAgainstTheAPIServer(b *testing.B) {
	c := localcluster.ForTest(b, localcluster.Options{NodePools: []localcluster.NodePool{}})
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		b.Fatal(err)
	}
	const ns = "bench"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	m, err := New(c.Config, Options{Log: logr.Discard()})
	if err != nil {
		b.Fatal(err)
	}
	ch, _ := chartValues(b)
	next := 0 // names stay new across the sub-benchmark's runs
	b.Run("operator", func(b *testing.B) {
		var cpu time.Duration
		b.ReportAllocs()
		for range b.N {
			b.StopTimer()
			next++
			name := fmt.Sprintf("m%d", next)
			ms := &servingv1alpha1.ModelServer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: "u"}}
			ms.Spec.Model = &servingv1alpha1.ModelSpec{StorageURI: "s3://models/" + name}
			vals := valuesOf(b, ms, nil)
			before := processCPU(b)
			b.StartTimer()
			_, op, err := m.Install(ctx, ns, name, ch, vals, "d")
			b.StopTimer()
			cpu += processCPU(b) - before
			if err != nil || op != OpInstall {
				b.Fatalf("install %s: %s, %v", name, op, err)
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "CPU-ms/install")
	})
}

// processCPU is the CPU this process has used, user and system.
func processCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
