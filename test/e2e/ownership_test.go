package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/internal/names"
)

// An object of the user's that happens to have the name of one the release
// needs is left exactly as it is, through install and delete, and the
// ModelServer says which object is in the way and what to do.
func TestAnObjectOfTheUsersWithTheSameNameIsNeverAdoptedChangedOrDeleted(t *testing.T) {
	c, _ := runningOperator(t)
	for _, tc := range []struct {
		kind, name string
		create     []string
	}{
		{"ConfigMap", names.ConfigMap("resnet"), []string{"create", "configmap", names.ConfigMap("resnet"), "--from-literal=models.config=mine"}},
		{"Service", names.Service("resnet"), []string{"create", "service", "clusterip", names.Service("resnet"), "--tcp=80:8080"}},
		{"Deployment", names.Deployment("resnet"), []string{"create", "deployment", names.Deployment("resnet"), "--image=registry.invalid/users-own:1"}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			ns := kubectlNamespace(t, c)
			kubectl(t, c, append(tc.create, "-n", ns)...)
			ref := strings.ToLower(tc.kind) + "/" + tc.name
			before := usersPart(t, c, ns, ref)

			kubectl(t, c, "apply", "-n", ns, "-f", repoPath("config/samples/serving_v1alpha1_modelserver.yaml"))
			reason := waitForCondition(t, c, ns, "resnet", "Deployed", "Conflict", 60*time.Second)
			msg := kubectl(t, c, "get", "-n", ns, "ms/resnet", "-o", "jsonpath={.status.message}")
			for _, want := range []string{fmt.Sprintf("%s %q in namespace %s", tc.kind, tc.name, ns), "will not adopt", "delete or rename"} {
				if !strings.Contains(msg, want) {
					t.Errorf("status.message %q lacks %q", msg, want)
				}
			}
			if phase := kubectl(t, c, "get", "-n", ns, "ms/resnet", "-o", "jsonpath={.status.phase}"); phase != "Failed" {
				t.Errorf("phase %s, want Failed", phase)
			}
			events := kubectl(t, c, "get", "events", "-n", ns, "--field-selector", "reason=Conflict", "-o", "name")
			if events == "" {
				t.Error("no Conflict event")
			}
			if out := kubectl(t, c, "get", "secrets", "-n", ns, "-l", "owner=helm", "-o", "name"); out != "" {
				t.Errorf("a release record was written: %s", out)
			}

			kubectl(t, c, "delete", "-n", ns, "ms/resnet", "--wait", "--timeout=60s")
			if after := usersPart(t, c, ns, ref); after != before {
				t.Errorf("the user's %s was changed:\nbefore: %s\nafter:  %s", tc.kind, before, after)
			}
			report(t, "a user's "+tc.kind+" already has the name the release needs", 1,
				"not adopted, changed or deleted; ModelServer %s (%s)", reason, firstWords(msg, 14))
		})
	}
}

// usersPart is the object ref in ns as its user wrote it: without its
// status, and without what the API server and the object's own controller
// write beside it (the resource version, managed fields, a Deployment's
// revision annotation). A Deployment's controller records that its pods
// are refused, seconds after it is created; the operator writes none of
// these, and any other change is the operator's.
func usersPart(t *testing.T, c *localcluster.Cluster, ns, ref string) string {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(kubectl(t, c, "get", "-n", ns, ref, "-o", "json")), &obj); err != nil {
		t.Fatal(err)
	}
	delete(obj, "status")
	if meta, ok := obj["metadata"].(map[string]any); ok {
		delete(meta, "resourceVersion")
		delete(meta, "managedFields")
		if annotations, ok := meta["annotations"].(map[string]any); ok {
			delete(annotations, "deployment.kubernetes.io/revision")
		}
	}
	out, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// Deleting ModelServers removes what they created and nothing of the
// user's: not the claim a pvc:// model is read from, not the credentials.
func TestDeletingAModelServerLeavesTheUsersClaimAndSecret(t *testing.T) {
	c, _ := runningOperator(t)
	ns := kubectlNamespace(t, c)
	kubectlStdin(t, c, `
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: users-models
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Secret
metadata:
  name: users-s3
stringData:
  AWS_ACCESS_KEY_ID: AKIAUSERSOWN
  AWS_SECRET_ACCESS_KEY: users-own-secret
---
apiVersion: serving.modelserver.dev/v1alpha1
kind: ModelServer
metadata:
  name: from-claim
spec:
  model:
    storageUri: pvc://users-models/resnet
---
apiVersion: serving.modelserver.dev/v1alpha1
kind: ModelServer
metadata:
  name: from-s3
spec:
  model:
    storageUri: s3://models/resnet
    credentialsSecret: users-s3
`, "apply", "-n", ns, "-f", "-")
	kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms/from-claim", "ms/from-s3", "--timeout=90s")
	claimUID := kubectl(t, c, "get", "-n", ns, "pvc/users-models", "-o", "jsonpath={.metadata.uid}")
	secretVersion := kubectl(t, c, "get", "-n", ns, "secret/users-s3", "-o", "jsonpath={.metadata.resourceVersion}")

	kubectl(t, c, "delete", "-n", ns, "ms/from-claim", "ms/from-s3", "--wait", "--timeout=60s")
	// Garbage collection acts after the ModelServers are gone; give it
	// the chance to do harm.
	time.Sleep(3 * time.Second)
	got := kubectl(t, c, "get", "-n", ns, "pvc/users-models", "-o", "jsonpath={.metadata.uid} {.metadata.deletionTimestamp}")
	if got != claimUID {
		t.Errorf("the user's claim: %q, want uid %s and no deletion", got, claimUID)
	}
	if v := kubectl(t, c, "get", "-n", ns, "secret/users-s3", "-o", "jsonpath={.metadata.resourceVersion}"); v != secretVersion {
		t.Errorf("the user's Secret changed: resourceVersion %s → %s", secretVersion, v)
	}
	report(t, "ModelServers reading a user's pvc:// claim and credentials Secret deleted", 1, "claim and Secret untouched")
}

// waitForCondition waits for a condition of the ModelServer to have the
// reason, and returns it.
func waitForCondition(t *testing.T, c *localcluster.Cluster, ns, name, cond, reason string, timeout time.Duration) string {
	t.Helper()
	var got string
	waitFor(t, timeout, fmt.Sprintf("%s condition %s reason %s", name, cond, reason), func(context.Context) (bool, error) {
		out, err := kubectlWith(c, "get", "-n", ns, "ms/"+name, "-o",
			fmt.Sprintf(`jsonpath={.status.conditions[?(@.type==%q)].reason}`, cond))
		got = strings.TrimSpace(out)
		if err != nil {
			return false, fmt.Errorf("%v: %s", err, out)
		}
		return got == reason, fmt.Errorf("reason %q", got)
	})
	return got
}

func firstWords(s string, n int) string {
	f := strings.Fields(s)
	if len(f) <= n {
		return s
	}
	return strings.Join(f[:n], " ") + " …"
}
