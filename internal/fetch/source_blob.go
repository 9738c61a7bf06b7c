package fetch

import (
	"context"
	"errors"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// blobSource is an S3 bucket, through gocloud.dev/blob, and a prefix in
// it.
type blobSource struct {
	bucketPrefix
	bucket *blob.Bucket
}

func (s *blobSource) List(ctx context.Context) (Listing, error) {
	keys := s.listing()
	it := s.bucket.List(&blob.ListOptions{Prefix: s.listPrefix()})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Listing{}, classify(err, s.Describe(""))
		}
		var listed s3types.Object
		var etag string
		if obj.As(&listed) {
			etag = aws.ToString(listed.ETag)
		}
		if err := keys.add(obj.Key, obj.Size, etag); err != nil {
			return Listing{}, err
		}
	}
	return keys.done(func() (int64, string, bool, error) {
		attrs, err := s.bucket.Attributes(ctx, s.prefix)
		switch {
		case err == nil:
			return attrs.Size, attrs.ETag, true, nil
		case gcerrors.Code(err) == gcerrors.NotFound:
			return 0, "", false, nil
		}
		return 0, "", false, classify(err, s.Describe(""))
	})
}

func (s *blobSource) Open(ctx context.Context, rel string) (io.ReadCloser, objectInfo, error) {
	r, err := s.bucket.NewReader(ctx, s.key(rel), nil)
	if err != nil {
		return nil, objectInfo{}, classify(err, s.Describe(rel))
	}
	return r, objectInfo{Size: r.Size(), Version: objectVersion(r)}, nil
}

func (s *blobSource) OpenRange(ctx context.Context, rel string, offset, length int64) (io.ReadCloser, objectInfo, error) {
	r, err := s.bucket.NewRangeReader(ctx, s.key(rel), offset, length, nil)
	if err != nil {
		return nil, objectInfo{}, classify(err, s.Describe(rel))
	}
	return r, objectInfo{Size: r.Size(), Version: objectVersion(r)}, nil
}

// objectVersion is what identifies the content r reads: S3's ETag; "" for
// a store that does not tell it.
func objectVersion(r *blob.Reader) string {
	var s3Object s3.GetObjectOutput
	if r.As(&s3Object) {
		return aws.ToString(s3Object.ETag)
	}
	return ""
}

func (s *blobSource) Close() error { return s.bucket.Close() }
