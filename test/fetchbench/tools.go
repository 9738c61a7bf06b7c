package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/modelserver-dev/modelserver-operator/internal/fetch"
	"github.com/modelserver-dev/modelserver-operator/internal/fetchcontract"
	"github.com/modelserver-dev/modelserver-operator/test/s3server"
)

// A tool copies a shape from the server into a fresh directory.
type tool struct {
	Name    string `json:"name"`
	Binary  string `json:"binary"`
	Version string `json:"version"`
	// Settings are the options given for speed, as a reader would type
	// them; the source, destination and keys are left out.
	Settings []string `json:"settings"`
	// Verifies says what the tool itself checks of what it copied.
	Verifies string `json:"verifies"`

	// command is the command line and the environment (beside PATH and
	// HOME) that copy shape into dest, an empty directory.
	command func(shape, dest string) (args, env []string)
	// modelDir is where, below dest, the files land; ignore lists what
	// the tool writes beside them.
	modelDir func(dest string) string
	ignore   []string
}

// oursVariants are builds of the fetcher that leave out work s5cmd does
// not do, or hash with XXH3, which is not cryptographic, in place of
// BLAKE3, so that a run shows what each part of ours' costs: `make
// bench-fetch` builds each beside the fetcher, named with its suffix, from
// the build tags that turn the hash or the flush off or swap the hash
// (internal/fetch, benchvariant*.go). None is ever shipped.
var oursVariants = []struct{ name, suffix, verifies string }{
	{"ours-nohash", "-nohash", "sizes against the listing; hashes nothing (build tag fetchbench_nohash), still flushes before it exits"},
	{"ours-noflush", "-noflush", oursVerifies + "; leaves its writes in the page cache (build tag fetchbench_noflush)"},
	{"ours-bare", "-bare", "sizes against the listing; hashes nothing and leaves its writes in the page cache, as s5cmd (both build tags)"},
	{"ours-xxh3", "-xxh3", "XXH3-128 of every byte in place of BLAKE3, not a cryptographic hash (build tag fetchbench_xxh3); sizes against the listing; flushes as ours"},
}

// oursVerifies is what the shipped fetcher checks of what it copies.
const oursVerifies = "BLAKE3 of every byte (a file of 64 MiB or more by its 16 MiB chunks), recorded in its manifest; sizes against the listing"

// toolNames are the tools -tools may name.
func toolNames() []string {
	names := []string{"ours"}
	for _, v := range oursVariants {
		names = append(names, v.name)
	}
	return append(names, "s5cmd", "rclone")
}

// toolSettings are the knobs each tool is given, flags as their users
// would pass them.
type toolSettings struct {
	OursConcurrency    int
	S5cmdWorkers       int
	S5cmdConcurrency   int
	S5cmdPartSizeMiB   int
	RcloneTransfers    int
	RcloneCheckers     int
	RcloneStreams      int
	RcloneStreamCutoff string
}

func defaultToolSettings() toolSettings {
	return toolSettings{
		OursConcurrency:    fetch.DefaultConcurrency,
		S5cmdWorkers:       64,
		S5cmdConcurrency:   16,
		S5cmdPartSizeMiB:   16,
		RcloneTransfers:    16,
		RcloneCheckers:     16,
		RcloneStreams:      16,
		RcloneStreamCutoff: "64Mi",
	}
}

// newTools describes ours (`fetcher fetch`, as the fetch Job runs it),
// s5cmd and rclone against srv; credsDir is where ours finds its
// credentials Secret, as the Job mounts it.
func newTools(srv *server, fetcher, bin, credsDir string, s toolSettings) []*tool {
	uri := func(sh string) string { return "s3://" + bucket + "/" + sh }
	model := func(dest string) string { return filepath.Join(dest, "model") }
	awsEnv := []string{
		"AWS_ACCESS_KEY_ID=" + srv.Creds.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + srv.Creds.SecretKey,
		"AWS_REGION=" + s3server.Region,
	}
	oursTool := func(name, binary, verifies string) *tool {
		return &tool{
			Name:     name,
			Binary:   binary,
			Settings: []string{"--concurrency=" + strconv.Itoa(s.OursConcurrency)},
			Verifies: verifies,
			command: func(sh, dest string) ([]string, []string) {
				return []string{binary, "fetch", "--uri", uri(sh), "--dest", model(dest),
					"--credentials-dir", credsDir, "--termination-log", "",
					"--concurrency", strconv.Itoa(s.OursConcurrency)}, nil
			},
			modelDir: model,
			ignore:   []string{fetchcontract.ManifestName},
		}
	}
	tools := []*tool{oursTool("ours", fetcher, oursVerifies)}
	for _, v := range oursVariants {
		tools = append(tools, oursTool(v.name, fetcher+v.suffix, v.verifies))
	}
	s5cmdBin := filepath.Join(bin, "s5cmd")
	s5cmdSettings := []string{"--numworkers=" + strconv.Itoa(s.S5cmdWorkers), "cp",
		"--concurrency=" + strconv.Itoa(s.S5cmdConcurrency), "--part-size=" + strconv.Itoa(s.S5cmdPartSizeMiB)}
	s5cmd := &tool{
		Name:     "s5cmd",
		Binary:   s5cmdBin,
		Settings: s5cmdSettings,
		Verifies: "sizes only",
		command: func(sh, dest string) ([]string, []string) {
			args := []string{s5cmdBin, "--endpoint-url", srv.Endpoint, s5cmdSettings[0]}
			args = append(args, s5cmdSettings[1:]...)
			args = append(args, uri(sh)+"/*", model(dest)+"/")
			return args, awsEnv
		},
		modelDir: model,
	}
	rcloneBin := filepath.Join(bin, "rclone")
	rcloneSettings := []string{
		"--transfers=" + strconv.Itoa(s.RcloneTransfers),
		"--checkers=" + strconv.Itoa(s.RcloneCheckers),
		"--multi-thread-streams=" + strconv.Itoa(s.RcloneStreams),
		"--multi-thread-cutoff=" + s.RcloneStreamCutoff,
		"--fast-list",
		"--no-check-dest",
	}
	rclone := &tool{
		Name:     "rclone",
		Binary:   rcloneBin,
		Settings: rcloneSettings,
		Verifies: "MD5 of every file against its ETag (read back from disk after a multi-thread download)",
		command: func(sh, dest string) ([]string, []string) {
			args := append([]string{rcloneBin, "copy", ":s3:" + bucket + "/" + sh, model(dest), "--config", "", "-q"}, rcloneSettings...)
			// The on-the-fly remote ":s3:" takes its options from the
			// environment, where `ps` does not show the keys.
			env := []string{
				"RCLONE_S3_PROVIDER=Other",
				"RCLONE_S3_ENDPOINT=" + srv.Endpoint,
				"RCLONE_S3_REGION=" + s3server.Region,
				"RCLONE_S3_FORCE_PATH_STYLE=true",
				"RCLONE_S3_ACCESS_KEY_ID=" + srv.Creds.AccessKey,
				"RCLONE_S3_SECRET_ACCESS_KEY=" + srv.Creds.SecretKey,
			}
			return args, env
		},
		modelDir: model,
	}
	return append(tools, s5cmd, rclone)
}

// writeCredentials writes the Secret the fetch Job would mount for srv.
func writeCredentials(dir string, srv *server) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for k, v := range map[string]string{
		fetch.KeyAWSAccessKeyID:     srv.Creds.AccessKey,
		fetch.KeyAWSSecretAccessKey: srv.Creds.SecretKey,
		fetch.KeyAWSEndpointURL:     srv.Endpoint,
		fetch.KeyAWSRegion:          s3server.Region,
		fetch.KeyAWSForcePathStyle:  "true",
	} {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// moduleVersion is the version of module that the go.mod at path
// requires, or "unknown".
func moduleVersion(path, module string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == module && strings.HasPrefix(f[1], "v") {
			return f[1]
		}
	}
	return "unknown"
}
