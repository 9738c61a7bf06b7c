// Package s3server runs versitygw, a real S3-compatible server, on a local
// directory: the object store that the fetcher's tests and the local cluster
// fetch models from. Unlike an in-process fake, it signs, lists, pages and
// fails the way an S3 service does, over a real socket.
//
// The binary is built from the version pinned in hack/tools/versitygw by
// `make tools`.
package s3server

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Region is the region the server and its clients agree on; it is
// versitygw's default, and the fetcher's when a Secret names none.
const Region = "us-east-1"

// HealthPath answers GET without credentials once the server serves, which
// lets WaitReady tell "up" from "refusing my keys".
const HealthPath = "/health"

// Credentials are the root account's keys: the only account the server has,
// as no IAM service is configured.
type Credentials struct {
	AccessKey string
	SecretKey string
}

// NewCredentials makes random keys, so that no test or local cluster depends
// on a well-known secret, and a secret seen in a log was leaked by the code
// under test rather than typed by a person.
func NewCredentials() Credentials {
	// rand.Text is base32: letters and digits only, which every S3 client
	// and Secret format takes without quoting.
	return Credentials{
		AccessKey: rand.Text()[:20],
		SecretKey: rand.Text() + rand.Text()[:14],
	}
}

// RootDir is the directory, under a data directory, whose subdirectories are
// the buckets; an object is a file below its bucket's, its key split on '/'.
func RootDir(dataDir string) string { return filepath.Join(dataDir, "buckets") }

// metaDir holds what versitygw would otherwise keep in extended attributes
// (ETags, content types, ACLs).
func metaDir(dataDir string) string { return filepath.Join(dataDir, "meta") }

// PrepareDataDir creates the directories Command's server needs under
// dataDir; versitygw refuses to start without them.
func PrepareDataDir(dataDir string) error {
	for _, d := range []string{RootDir(dataDir), metaDir(dataDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// Command is the command line (args[0] is binary) and the environment to add
// to the inherited one for a versitygw that serves dataDir (prepared by
// PrepareDataDir) over plain HTTP on listenAddr ("127.0.0.1:9000"), with
// creds as its root account.
//
// The keys go in the environment, where `ps` does not show them. Metadata
// goes to a sidecar directory rather than extended attributes: tmpfs before
// Linux 6.6 and some container overlays refuse user xattrs, and versitygw's
// posix backend then will not start; the sidecar works on any file system.
func Command(binary, listenAddr, dataDir string, creds Credentials) (args []string, env []string) {
	args = []string{binary,
		"--port", listenAddr,
		"--health", HealthPath,
		"posix",
		"--sidecar", metaDir(dataDir),
		RootDir(dataDir),
	}
	env = []string{
		"ROOT_ACCESS_KEY=" + creds.AccessKey,
		"ROOT_SECRET_KEY=" + creds.SecretKey,
	}
	return args, env
}

// WaitReady polls endpoint ("http://127.0.0.1:9000") until its health check
// answers 200, or ctx ends.
func WaitReady(ctx context.Context, endpoint string) error {
	client := &http.Client{Timeout: time.Second}
	url := strings.TrimSuffix(endpoint, "/") + HealthPath
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s is not ready: %w (last attempt: %v)", endpoint, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Client is an S3 client for the server at endpoint. Path-style addressing
// (http://host/bucket/key) because the bucket is not a DNS name of a local
// server.
func Client(endpoint string, creds Credentials) *s3.Client {
	return s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(creds.AccessKey, creds.SecretKey, ""),
	})
}

// CreateBucket creates bucket; one that the root account already owns is
// not an error, so that a restarted local cluster can call it again.
func CreateBucket(ctx context.Context, client *s3.Client, bucket string) error {
	_, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	var owned *s3types.BucketAlreadyOwnedByYou
	if errors.As(err, &owned) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", bucket, err)
	}
	return nil
}

// UploadDir uploads every file below localDir as bucket/prefix/<path>, its
// path relative to localDir with '/' separators; prefix "" uploads to the
// top of the bucket. Only regular files are uploaded: object stores have no
// directories or links, so a tree holding a link is refused rather than
// uploaded differently from how it looks.
func UploadDir(ctx context.Context, client *s3.Client, bucket, prefix, localDir string) error {
	prefix = strings.Trim(prefix, "/")
	return filepath.WalkDir(localDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("upload %s: not a regular file", p)
		}
		rel, err := filepath.Rel(localDir, p)
		if err != nil {
			return err
		}
		return UploadFile(ctx, client, bucket, path.Join(prefix, filepath.ToSlash(rel)), p)
	})
}

// UploadFile uploads the file at localPath as bucket/key.
func UploadFile(ctx context.Context, client *s3.Client, bucket, key, localPath string) error {
	f, err := os.Open(localPath)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	// A file (a ReadSeeker) lets the SDK sign the payload and retry the
	// upload without holding it in memory.
	_, err = client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(bucket),
		Key:           aws.String(key),
		Body:          f,
		ContentLength: aws.Int64(st.Size()),
	})
	if err != nil {
		return fmt.Errorf("upload s3://%s/%s: %w", bucket, key, err)
	}
	return nil
}

// PutObject stores body as bucket/key: an archive built in memory, or bytes
// that are deliberately not what their name says.
func PutObject(ctx context.Context, client *s3.Client, bucket, key string, body []byte) error {
	_, err := client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
	})
	if err != nil {
		return fmt.Errorf("put s3://%s/%s: %w", bucket, key, err)
	}
	return nil
}
