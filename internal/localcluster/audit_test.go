package localcluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// auditedUser is the shared cluster's Options.AuditedUser.
const auditedUser = "audited-client"

// The benchmark counts an operator's requests from the audit log, so the
// log must hold each of the audited user's requests exactly where the
// count needs it (a watch once it streams, the rest once answered), and
// nothing of the admin's.
func TestTheAuditedUsersRequestsAndOnlyTheirsAreLogged(t *testing.T) {
	admin := sharedCluster(t)
	ns := namespace(t, admin)
	ctx := context.Background()
	c := shared.cluster

	path, err := c.UserKubeconfig(auditedUser, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	audited, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cms := audited.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "counted"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Patch(ctx, "counted", types.MergePatchType, []byte(`{"data":{"a":"b"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	<-w.ResultChan() // the ConfigMap, sent once the watch streams
	// The admin's read, after the audited user's, must not show.
	if _, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, "counted", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	// The watch is still open: it is logged when it starts streaming.
	var seen []string
	for _, e := range readAudit(t, c.AuditLog) {
		if e.User.Username != auditedUser {
			t.Errorf("a request of %q was logged: %+v", e.User.Username, e)
			continue
		}
		if e.ObjectRef.Namespace == ns {
			seen = append(seen, e.Stage+" "+e.Verb+" "+e.ObjectRef.Resource)
		}
	}
	w.Stop()
	want := []string{"ResponseComplete create configmaps", "ResponseComplete patch configmaps", "ResponseStarted watch configmaps"}
	if !slices.Equal(seen, want) {
		t.Errorf("logged for the namespace: %q, want %q", seen, want)
	}
}

type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
	} `json:"objectRef"`
}

func readAudit(t *testing.T, path string) []auditEvent {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var events []auditEvent
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		var e auditEvent
		if err := json.Unmarshal(s.Bytes(), &e); err != nil {
			t.Fatalf("%s: %v", s.Bytes(), err)
		}
		events = append(events, e)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return events
}
