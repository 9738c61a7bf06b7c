package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCredentialsNeverReachTheLogStatusOrEvents puts a recognisable canary
// in credentials Secrets, one usable and one with wrong keys, and looks for
// it everywhere the operator writes: its log, the ModelServers, every
// Event of the namespace and every object the release created.
func TestCredentialsNeverReachTheLogStatusOrEvents(t *testing.T) {
	c, _ := runningOperator(t)
	ns := kubectlNamespace(t, c)
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	canary := "canary" + hex.EncodeToString(b)
	kubectlStdin(t, c, fmt.Sprintf(`
apiVersion: v1
kind: Secret
metadata: {name: s3-creds}
stringData:
  AWS_ACCESS_KEY_ID: AKIA%[1]s
  AWS_SECRET_ACCESS_KEY: %[1]s/secret
---
apiVersion: v1
kind: Secret
metadata: {name: wrong-creds}
stringData:
  token: %[1]s/token
---
apiVersion: serving.modelserver.dev/v1alpha1
kind: ModelServer
metadata: {name: with-creds}
spec:
  model: {storageUri: "s3://models/resnet", credentialsSecret: s3-creds}
---
apiVersion: serving.modelserver.dev/v1alpha1
kind: ModelServer
metadata: {name: with-wrong-creds}
spec:
  model: {storageUri: "s3://models/resnet", credentialsSecret: wrong-creds}
`, canary), "apply", "-n", ns, "-f", "-")
	kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms/with-creds", "--timeout=90s")
	waitForCondition(t, c, ns, "with-wrong-creds", "Deployed", "InvalidSecret", 60*time.Second)

	places := map[string]string{
		"the operator's log":  readFile(operator.op.LogFile()),
		"the ModelServers":    kubectl(t, c, "get", "ms", "-n", ns, "-o", "yaml"),
		"the Events":          kubectl(t, c, "get", "events", "-n", ns, "-o", "yaml"),
		"the release objects": kubectl(t, c, "get", "deployments,jobs,configmaps,services,pvc", "-n", ns, "-o", "yaml"),
	}
	for where, text := range places {
		if strings.Contains(text, canary) {
			i := strings.Index(text, canary)
			t.Errorf("the Secret's value is in %s: …%s…", where, text[max(0, i-200):min(len(text), i+60)])
		}
	}
	report(t, "canary value in credentials Secrets (usable and wrong-keyed)", 1,
		"not found in the operator's log, the ModelServers' status, the namespace's Events or the release's objects")
}
