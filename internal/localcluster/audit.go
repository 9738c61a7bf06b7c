package localcluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// auditOneUser writes an audit policy that records user's requests and no
// one else's, and returns the apiserver flags that apply it. Only the
// stages that end a request's count are kept: ResponseStarted for a watch
// (which then streams for as long as it lasts), ResponseComplete for the
// rest. The log backend's blocking mode writes each line in the request's
// own handler, not in batches, so the file is at most a moment behind.
func (c *Cluster) auditOneUser(user string) ([]string, error) {
	// JSON is YAML; the policy is small enough to spell out.
	policy, err := json.Marshal(map[string]any{
		"apiVersion": "audit.k8s.io/v1",
		"kind":       "Policy",
		"omitStages": []string{"RequestReceived"},
		"rules": []map[string]any{
			{"level": "Metadata", "users": []string{user}},
			{"level": "None"},
		},
	})
	if err != nil {
		return nil, err
	}
	policyFile := filepath.Join(c.Dir, "audit-policy.yaml")
	if err := os.WriteFile(policyFile, policy, 0o600); err != nil {
		return nil, err
	}
	c.AuditLog = filepath.Join(c.Dir, "logs", "audit.log")
	return []string{
		"--audit-policy-file=" + policyFile,
		"--audit-log-path=" + c.AuditLog,
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
	}, nil
}

// UserKubeconfig writes a kubeconfig for a client that authenticates as
// user, a member of groups (system:masters to be an admin), with a client
// certificate of its own, and returns its path.
func (c *Cluster) UserKubeconfig(user string, groups ...string) (string, error) {
	if c.certs == nil {
		return "", fmt.Errorf("the cluster has no CA to issue certificates with")
	}
	return c.componentKubeconfig(c.certs, "user-"+user, user, groups...)
}
