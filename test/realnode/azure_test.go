package realnode

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
	"github.com/modelserver-dev/modelserver-operator/test/azblobserver"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
)

// TestAnAzureModelIsFetchedAsTheEntraApplicationOfThePodsServiceAccount:
// a ModelServer of a model in Data Lake Storage Gen2 (an account whose
// hierarchical namespace lists directories as marked empty blobs), named
// by its abfss:// URI, with no secret, signs in to Microsoft Entra ID as
// the application its service account is annotated with (Workload ID,
// webIdentity: {}), over TLS to both services. The token the real kubelet projected into the fetch pod is
// the client assertion, which the Entra stand-in, as Entra does with the
// issuer's keys, has the apiserver verify: bound to the fetch pod, for
// Entra's token exchange audience, of the pods' service account. A token
// of another account fails the fetch with AccessDenied and Entra's code.
func TestAnAzureModelIsFetchedAsTheEntraApplicationOfThePodsServiceAccount(t *testing.T) {
	t.Parallel()
	e := realNode(t)
	ns := e.namespace(t)
	const (
		clientID = "00000000-1111-2222-3333-444444444444"
		tenant   = "contoso.onmicrosoft.com"
	)
	subject := "system:serviceaccount:" + ns + ":model-reader"
	store := azblobserver.Serve(t, localcluster.HostAddress+":0", "modelstore", true)
	putDir(t, store, "half_plus_two", filepath.Join(e.Root, "test", "testdata", "tf-serving", "saved_model_half_plus_two_cpu"))
	store.AllowBearer("token-of-model-reader", true)

	reviews := e.tokenReviewer(values.DefaultEntraAudience)
	entra := azblobserver.ServeIdentity(t, localcluster.HostAddress+":0", func(r azblobserver.TokenRequest) (azblobserver.Token, error) {
		user, refused, err := reviews.review(context.Background(), r.ClientAssertion)
		if err != nil {
			return azblobserver.Token{}, err
		}
		if refused != "" {
			return azblobserver.Token{}, &azblobserver.Refusal{Status: http.StatusBadRequest, Code: "invalid_client", Description: "AADSTS700211: No matching federated identity record found for presented assertion issuer."}
		}
		if r.ClientID != clientID || r.Tenant != tenant || user.Username != subject {
			return azblobserver.Token{}, &azblobserver.Refusal{Status: http.StatusBadRequest, Code: "invalid_client",
				Description: "AADSTS700213: No matching federated identity record found for presented assertion subject '" + user.Username + "'."}
		}
		return azblobserver.Token{AccessToken: "token-of-model-reader"}, nil
	})

	for _, account := range []string{"model-reader", "stranger"} {
		e.kubectl(t, fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata:
  name: %s
  annotations:
    azure.workload.identity/client-id: %s
    azure.workload.identity/tenant-id: %s
`, account, clientID, tenant), "-n", ns, "apply", "-f", "-")
	}
	e.kubectl(t, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: azure-endpoints
stringData:
  AZURE_STORAGE_BLOB_ENDPOINT: %q
  AZURE_AUTHORITY_HOST: %q
  AZURE_CA_BUNDLE: %q
`, store.URL, entra.URL, string(store.CAPEM)+string(entra.CAPEM)), "-n", ns, "apply", "-f", "-")
	manifest := func(name, account string) string {
		return e.ModelServerYAML(realenv.ModelServer{Name: name, URI: "abfss://models@modelstore.dfs.core.windows.net/half_plus_two",
			Secret: "azure-endpoints", ModelExtra: "    webIdentity: {}\n", SpecExtra: "  podTemplate:\n    serviceAccountName: " + account + "\n"})
	}

	start := time.Now()
	e.kubectl(t, manifest("signed-in", "model-reader"), "-n", ns, "apply", "-f", "-")
	e.waitReady(t, ns, "signed-in", 3*time.Minute)
	t.Logf("kubectl apply to Ready, signed in with Workload ID: %.1fs", time.Since(start).Seconds())
	if got := e.modelStatus(t, ns, "signed-in"); got["123"] != "AVAILABLE" {
		t.Errorf("TF Serving (double) reports %v, want version 123 AVAILABLE", got)
	}
	reviews.wantOneBoundTo(t, "signed-in-fetch-")
	for _, r := range store.Requests() {
		if r.Auth != "Bearer" || r.Status >= 400 {
			t.Errorf("the store was asked %+v; want every request with the bearer token, answered", r)
		}
	}

	e.kubectl(t, manifest("stranger", "stranger"), "-n", ns, "apply", "-f", "-")
	msg := e.waitFetchFailed(t, ns, "stranger", servingv1alpha1.ReasonAccessDenied)
	t.Logf("another account's token: %s", msg)
	if !strings.Contains(msg, "AADSTS700213") || !strings.Contains(msg, "system:serviceaccount:"+ns+":stranger") {
		t.Errorf("ModelFetched says %q; want Entra's refusal of the stranger's token", msg)
	}
}

// putDir stores every file below dir in store's container "models", under
// prefix, and each directory as a hierarchical namespace lists it.
func putDir(t *testing.T, store *azblobserver.Server, prefix, dir string) {
	t.Helper()
	err := eachFile(dir, func(name string, data []byte) {
		store.Put("models", prefix+"/"+name, data)
		for d := path.Dir(prefix + "/" + name); d != "."; d = path.Dir(d) {
			store.PutDirectory("models", d)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}
