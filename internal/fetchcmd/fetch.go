package fetchcmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/fetch"
	"github.com/modelserver-dev/modelserver-operator/internal/fetchcontract"
)

// Fetch is the model-fetch Job's command, `fetch`. It leaves a one-line
// termination message for the operator and returns the exit code that
// tells the Job whether to retry: 3 for a failure that retrying cannot
// fix, 1 for any other.
func Fetch(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return fetchCommand(ctx, args, os.Stdout, os.Stderr)
}

// fetchCommand parses the flags, fetches, writes the termination message
// to --termination-log and stdout, and returns the exit code. Logs go to
// stderr as JSON.
func fetchCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fetch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		o              fetch.Options
		pinsFile       string
		settingsFile   string
		terminationLog string
		pullSecretsDir string
		pullSecrets    string
	)
	fs.StringVar(&o.URI, "uri", "", "The model's storage URI: s3://bucket/prefix, gs://bucket/prefix, https://<account>.blob.core.windows.net/container/prefix (or abfss://container@<account>.dfs.core.windows.net/prefix, wasbs://...), http(s)://host/file[#sha256=hex], pvc://claim/path, oci://registry/repository[:tag][@digest] or /absolute/dir.")
	fs.StringVar(&o.Dest, "dest", "", "The model's base directory as TF Serving sees it (for pvc://: where the claim's path is mounted, verified only).")
	fs.StringVar(&o.CredentialsDir, "credentials-dir", "", "A mounted Secret, one file per key (AWS_ACCESS_KEY_ID, service-account.json, http-headers, ...).")
	fs.StringVar(&o.WebIdentity.RoleARN, "web-identity-role-arn", "", "For s3://: the IAM role assumed with --web-identity-token-file through STS AssumeRoleWithWebIdentity, instead of keys.")
	fs.StringVar(&o.WebIdentity.Provider, "web-identity-provider", "", "For gs://: the Workload Identity Federation provider (projects/<number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>) that --web-identity-token-file is exchanged with, instead of a key.")
	fs.StringVar(&o.WebIdentity.ServiceAccount, "web-identity-service-account", "", "For gs://: the Google service account the federated identity impersonates (default: none, it reads as itself); with --gke-workload-identity, the one GKE's metadata server must answer as.")
	fs.BoolVar(&o.WebIdentity.GKEWorkloadIdentity, "gke-workload-identity", false, "For gs://, and oci:// in Google's registries: read with the access tokens of the node's GKE metadata server (Workload Identity Federation for GKE), instead of a key; refused if it answers as a Google service account other than --web-identity-service-account (none: the pod's workload identity, not an account).")
	fs.BoolVar(&o.WebIdentity.EKSPodIdentity, "eks-pod-identity", false, "For s3://: take the role of the service account's EKS Pod Identity association from the node's agent, with --web-identity-token-file, instead of keys.")
	fs.StringVar(&o.WebIdentity.ClientID, "web-identity-client-id", "", "For Azure Blob Storage: the Microsoft Entra application (or managed identity) signed in as with --web-identity-token-file (Workload ID), instead of a key.")
	fs.StringVar(&o.WebIdentity.TenantID, "web-identity-tenant-id", "", "For Azure Blob Storage: the Microsoft Entra tenant of --web-identity-client-id.")
	fs.StringVar(&o.WebIdentity.TokenFile, "web-identity-token-file", "", "The service account token the role is assumed with, exchanged at the provider, or signed in with, read again for each new credential.")
	fs.StringVar(&o.WebIdentity.SessionName, "web-identity-session-name", "", "The STS session's name, as the store's audit log shows it (default: modelserver-fetch).")
	fs.StringVar(&pullSecretsDir, "pull-secrets-dir", "", "Where the image pull secrets named by --pull-secrets are mounted, each in a directory of its name holding its .dockerconfigjson or .dockercfg.")
	fs.StringVar(&pullSecrets, "pull-secrets", "", "The serving pods' image pull secrets, comma-separated, whose registry credentials an oci:// model's registry is given after those of --credentials-dir.")
	fs.Func("signature-key", "A PEM public key whose cosign signature an oci:// model's image must carry; repeat for several, any of which verifies.", func(v string) error {
		o.SignatureKeys = append(o.SignatureKeys, v)
		return nil
	})
	fs.StringVar(&o.SignatureRepository, "signature-repository", "", "Where the cosign signatures of an oci:// model's image are, registry/repository, when not beside the image (cosign's COSIGN_REPOSITORY).")
	fs.StringVar(&pinsFile, "pins", "", "A JSON object mapping the base name of --dest to what the model-fetch Job found there ({\"digest\": ..., \"image\": ..., \"versions\": [...]}): the copy must have that digest, an oci:// model is pulled by that image, and the versions are fetched in place of --versions. For a serving pod's own copy (storage mode PerPod); a destination it does not name is not pinned.")
	fs.Func("versions", "Which version directories of a listed model to fetch: latest:N (the N highest), the versions comma-separated, or all (the default). An archive or an image is fetched whole.", func(s string) (err error) {
		o.Versions, err = fetchcontract.ParseVersions(s)
		return err
	})
	fs.StringVar(&o.ServedConfig, "served-config", "", "The serving pods' model config (TF Serving's --model_config_file): models beside --dest that it no longer names, published before all it names, are removed before the download.")
	fs.Int64Var(&o.VolumeSize, "volume-size", 0, "The size of the volume --dest is on, in bytes, where its file system does not tell it (an emptyDir's size limit): a model that does not fit is refused before the download (0: as the file system says).")
	fs.Int64Var(&o.MaxBytes, "max-bytes", 0, "The largest model accepted, in bytes (0: 1 TiB).")
	fs.IntVar(&o.Concurrency, "concurrency", fetch.DefaultConcurrency, "How many files are downloaded at once.")
	fs.DurationVar(&o.Timeout, "timeout", 0, "The longest the whole fetch may take (0: no limit). A model-fetch Job's is its activeDeadlineSeconds, which the operator may raise while it runs.")
	fs.StringVar(&settingsFile, "settings", "", "A JSON object of the settings a serving pod's fetch reads at each start (storage mode PerPod), which may change while the pod runs: {\"timeout\": \"1h0m0s\"} bounds the fetch in place of --timeout. A missing file changes nothing.")
	fs.StringVar(&terminationLog, "termination-log", "/dev/termination-log", "Where the one-line result is written for the operator (empty: nowhere).")
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	o.Logger = log

	var (
		sum fetch.Summary
		err error
	)
	if perr := fs.Parse(args); errors.Is(perr, flag.ErrHelp) {
		return 0
	} else if perr != nil {
		err = &fetch.Error{Reason: servingv1alpha1.ReasonFetchFailed, Message: "bad arguments: " + perr.Error(), Permanent: true}
	}
	if pullSecrets != "" {
		for _, name := range strings.Split(pullSecrets, ",") {
			o.PullSecrets = append(o.PullSecrets, fetch.PullSecret{Name: name, Dir: filepath.Join(pullSecretsDir, name)})
		}
	}
	switch {
	case err != nil:
	case identities(o.WebIdentity) != 0 && o.WebIdentity.TokenFile == "" || identities(o.WebIdentity) != 1 && o.WebIdentity.TokenFile != "":
		err = &fetch.Error{Reason: servingv1alpha1.ReasonFetchFailed, Message: "--web-identity-token-file goes with one of --web-identity-role-arn, --web-identity-provider, --web-identity-client-id and --eks-pod-identity", Permanent: true}
	case o.WebIdentity.GKEWorkloadIdentity && (o.WebIdentity.TokenFile != "" || identities(o.WebIdentity) != 0):
		err = &fetch.Error{Reason: servingv1alpha1.ReasonFetchFailed, Message: "--gke-workload-identity goes with no other identity and no --web-identity-token-file: the metadata server knows the pod by its address", Permanent: true}
	case (o.WebIdentity.ClientID == "") != (o.WebIdentity.TenantID == ""):
		err = &fetch.Error{Reason: servingv1alpha1.ReasonFetchFailed, Message: "--web-identity-client-id goes with --web-identity-tenant-id", Permanent: true}
	case pullSecrets != "" && pullSecretsDir == "":
		err = &fetch.Error{Reason: servingv1alpha1.ReasonFetchFailed, Message: "--pull-secrets needs --pull-secrets-dir", Permanent: true}
	case fs.NArg() > 0:
		err = &fetch.Error{Reason: servingv1alpha1.ReasonFetchFailed, Message: fmt.Sprintf("unexpected arguments %q", fs.Args()), Permanent: true}
	case o.URI == "":
		err = &fetch.Error{Reason: servingv1alpha1.ReasonInvalidURI, Message: "--uri is required", Permanent: true}
	case o.MaxBytes < 0 || o.VolumeSize < 0 || o.Concurrency < 1 || o.Timeout < 0:
		err = &fetch.Error{Reason: servingv1alpha1.ReasonFetchFailed, Message: "--max-bytes, --volume-size and --timeout must not be negative, --concurrency must be at least 1", Permanent: true}
	default:
		if err = readSettings(settingsFile, &o, log); err != nil {
			break
		}
		if o.Pin, err = readPin(pinsFile, o.Dest, log); err == nil {
			sum, err = fetch.Run(ctx, o)
		}
	}

	msg := fetch.TerminationMessage(sum, err)
	if terminationLog != "" {
		if werr := os.WriteFile(terminationLog, []byte(msg+"\n"), 0o644); werr != nil {
			log.Warn("could not write the termination message", "path", terminationLog, "error", werr.Error())
		}
	}
	_, _ = fmt.Fprintln(stdout, msg)
	if err != nil {
		log.Error("fetch failed", "message", msg, "reason", fetch.AsError(err).Reason, "exitCode", fetch.ExitCode(err))
	}
	return fetch.ExitCode(err)
}

// identities counts the identities a web identity names: a role, a
// federation provider, an Entra application, a pod identity association.
func identities(w fetch.WebIdentity) int {
	n := 0
	for _, named := range []bool{w.RoleARN != "", w.Provider != "", w.ClientID != "", w.EKSPodIdentity} {
		if named {
			n++
		}
	}
	return n
}

// readSettings puts what the settings file says into o; a missing file
// leaves o as the flags made it: a pod of an operator before the file
// still starts.
func readSettings(file string, o *fetch.Options, log *slog.Logger) error {
	if file == "" {
		return nil
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		log.Info("no settings file: the flags hold", "settings", file)
		return nil
	} else if err != nil {
		return &fetch.Error{Reason: servingv1alpha1.ReasonFetchFailed, Message: "read the settings: " + err.Error()}
	}
	var s fetchcontract.PodFetchSettings
	if err := json.Unmarshal(b, &s); err != nil {
		return &fetch.Error{Reason: servingv1alpha1.ReasonFetchFailed, Message: fmt.Sprintf("the settings file %s: %v", file, err), Permanent: true}
	}
	if s.Timeout != "" {
		d, err := time.ParseDuration(s.Timeout)
		if err != nil || d < 0 {
			return &fetch.Error{Reason: servingv1alpha1.ReasonFetchFailed, Message: fmt.Sprintf("the settings file %s: timeout %q is not a duration of 0 or more", file, s.Timeout), Permanent: true}
		}
		o.Timeout, o.TimeoutFrom = d, "spec.fetch.timeout"
		log.Info("the fetch is bounded by the settings file's timeout", "timeout", d.String())
	}
	return nil
}

// readPin is the pin of dest in the pins file, zero if the file or the
// entry is missing: a pod that starts while its generation's Job still
// fetches has nothing to match yet.
func readPin(file, dest string, log *slog.Logger) (fetch.Pin, error) {
	if file == "" {
		return fetch.Pin{}, nil
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		log.Info("no pins file: the copy is not pinned", "pins", file)
		return fetch.Pin{}, nil
	} else if err != nil {
		return fetch.Pin{}, &fetch.Error{Reason: servingv1alpha1.ReasonFetchFailed, Message: "read the pins: " + err.Error()}
	}
	var pins map[string]fetch.Pin
	if err := json.Unmarshal(b, &pins); err != nil {
		return fetch.Pin{}, &fetch.Error{Reason: servingv1alpha1.ReasonFetchFailed, Message: fmt.Sprintf("the pins file %s: %v", file, err), Permanent: true}
	}
	pin, ok := pins[filepath.Base(filepath.Clean(dest))]
	if !ok {
		log.Info("the model's fetch Job has not verified it yet: the copy is not pinned", "dest", dest)
		return fetch.Pin{}, nil
	}
	log.Info("the copy must be what the model's fetch Job verified", "digest", pin.Digest, "image", pin.Image, "versions", pin.Versions)
	return pin, nil
}
