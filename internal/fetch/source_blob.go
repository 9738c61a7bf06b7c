package fetch

import (
	"context"
	"errors"
	"io"
	"path"
	"strconv"
	"strings"

	"cloud.google.com/go/storage"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
)

// blobSource is a bucket of an object store (S3 or GCS, through
// gocloud.dev/blob) and a prefix in it.
type blobSource struct {
	bucket   *blob.Bucket
	scheme   storageuri.Scheme
	name     string // the bucket
	prefix   string // no leading or trailing slash; "" for the whole bucket
	single   string // the key of the one object, when the prefix names one
	maxFiles int
}

func (s *blobSource) listPrefix() string {
	if s.prefix == "" {
		return ""
	}
	return s.prefix + "/"
}

func (s *blobSource) List(ctx context.Context) (Listing, error) {
	var l Listing
	p := s.listPrefix()
	it := s.bucket.List(&blob.ListOptions{Prefix: p})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Listing{}, classify(err, s.Describe(""))
		}
		rel := strings.TrimPrefix(obj.Key, p)
		// A key ending in "/" is a folder marker, as the S3 console's
		// "Create folder" leaves; one for the prefix itself ("prefix/")
		// is left empty once the prefix is cut off.
		if rel == "" || strings.HasSuffix(rel, "/") {
			if rel = strings.TrimSuffix(rel, "/"); rel != "" && storageuri.SafeRelPath(rel) {
				l.Dirs = append(l.Dirs, rel)
			}
			continue
		}
		if !storageuri.SafeRelPath(rel) {
			return Listing{}, permanentf(servingv1alpha1.ReasonInvalidLayout, "%s: the object key %q has empty, . or .. path segments", s.Describe(""), obj.Key)
		}
		l.Objects = append(l.Objects, Object{Key: rel, Size: obj.Size})
		if len(l.Objects) > s.maxFiles {
			return Listing{}, permanentf(servingv1alpha1.ReasonTooLarge, "%s holds more than %d files", s.Describe(""), s.maxFiles)
		}
	}
	if len(l.Objects) > 0 {
		return l, nil
	}
	// Nothing below prefix/: the prefix may name one object (an archive).
	if s.prefix != "" {
		attrs, err := s.bucket.Attributes(ctx, s.prefix)
		if err == nil {
			s.single = s.prefix
			return Listing{Single: true, Objects: []Object{{Key: path.Base(s.prefix), Size: attrs.Size}}}, nil
		}
		if gcerrors.Code(err) != gcerrors.NotFound {
			return Listing{}, classify(err, s.Describe(""))
		}
	}
	return Listing{}, permanentf(servingv1alpha1.ReasonNotFound, "no objects under %s (check spec.model.storageUri)", s.Describe(""))
}

func (s *blobSource) key(rel string) string {
	if s.single != "" {
		return s.single
	}
	return s.listPrefix() + rel
}

func (s *blobSource) Open(ctx context.Context, rel string) (io.ReadCloser, int64, error) {
	r, err := s.bucket.NewReader(ctx, s.key(rel), nil)
	if err != nil {
		return nil, 0, classify(err, s.Describe(rel))
	}
	return r, r.Size(), nil
}

func (s *blobSource) OpenRange(ctx context.Context, rel string, offset, length int64) (io.ReadCloser, rangeInfo, error) {
	r, err := s.bucket.NewRangeReader(ctx, s.key(rel), offset, length, nil)
	if err != nil {
		return nil, rangeInfo{}, classify(err, s.Describe(rel))
	}
	return r, rangeInfo{Size: r.Size(), Version: objectVersion(r)}, nil
}

// objectVersion is what identifies the content r reads: S3's ETag, GCS's
// generation; "" for a store that tells neither.
func objectVersion(r *blob.Reader) string {
	var s3Object s3.GetObjectOutput
	if r.As(&s3Object) {
		return aws.ToString(s3Object.ETag)
	}
	var gcsObject *storage.Reader
	if r.As(&gcsObject) && gcsObject != nil {
		return strconv.FormatInt(gcsObject.Attrs.Generation, 10)
	}
	return ""
}

func (s *blobSource) Describe(rel string) string {
	if rel == "" {
		return string(s.scheme) + "://" + s.name + "/" + s.listPrefix()
	}
	return string(s.scheme) + "://" + s.name + "/" + s.key(rel)
}

func (s *blobSource) Close() error { return s.bucket.Close() }
