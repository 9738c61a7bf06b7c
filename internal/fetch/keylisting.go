package fetch

import (
	"path"
	"strings"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
)

// keyListing turns the keys an object store lists below a prefix into a
// Listing, by the rules every store's source follows: keys relative to
// the prefix, folder markers kept as directories, unsafe paths refused,
// and at most maxFiles files.
type keyListing struct {
	l        Listing
	scheme   storageuri.Scheme
	bucket   string
	prefix   string // no leading or trailing slash; "" for the whole bucket
	maxFiles int
}

func newKeyListing(scheme storageuri.Scheme, bucket, prefix string, maxFiles int) *keyListing {
	return &keyListing{scheme: scheme, bucket: bucket, prefix: prefix, maxFiles: maxFiles}
}

// listPrefix is what the store is asked to list: the prefix as a
// directory, so that "m" does not list "m2/…".
func (k *keyListing) listPrefix() string {
	if k.prefix == "" {
		return ""
	}
	return k.prefix + "/"
}

// describePrefix names the listed prefix for messages.
func (k *keyListing) describePrefix() string {
	return describeKey(k.scheme, k.bucket, k.prefix, "", "")
}

// add takes one listed key and its size.
func (k *keyListing) add(key string, size int64) error {
	p := k.listPrefix()
	rel := strings.TrimPrefix(key, p)
	// A key ending in "/" is a folder marker, as the S3 console's "Create
	// folder" leaves; one for the prefix itself ("prefix/") is left empty
	// once the prefix is cut off.
	if rel == "" || strings.HasSuffix(rel, "/") {
		if rel = strings.TrimSuffix(rel, "/"); rel != "" && storageuri.SafeRelPath(rel) {
			k.l.Dirs = append(k.l.Dirs, rel)
		}
		return nil
	}
	if !storageuri.SafeRelPath(rel) {
		return permanentf(servingv1alpha1.ReasonInvalidLayout, "%s: the object key %q has empty, . or .. path segments", k.describePrefix(), key)
	}
	k.l.Objects = append(k.l.Objects, Object{Key: rel, Size: size})
	if len(k.l.Objects) > k.maxFiles {
		return permanentf(servingv1alpha1.ReasonTooLarge, "%s holds more than %d files", k.describePrefix(), k.maxFiles)
	}
	return nil
}

// done is the listing once every key is added. With no file below the
// prefix, the prefix may name one object (an archive): lookup tells
// whether it does, and its size.
func (k *keyListing) done(lookup func() (size int64, found bool, err error)) (Listing, error) {
	if len(k.l.Objects) > 0 {
		return k.l, nil
	}
	if k.prefix != "" {
		size, found, err := lookup()
		if err != nil {
			return Listing{}, err
		}
		if found {
			return Listing{Single: true, Objects: []Object{{Key: path.Base(k.prefix), Size: size}}}, nil
		}
	}
	return Listing{}, permanentf(servingv1alpha1.ReasonNotFound, "no objects under %s (check spec.model.storageUri)", k.describePrefix())
}

// objectKey is the key of the file rel of a listing below prefix, or
// single when the prefix named one object.
func objectKey(prefix, single, rel string) string {
	if single != "" {
		return single
	}
	if prefix == "" {
		return rel
	}
	return prefix + "/" + rel
}

// describeKey names the file rel (the prefix itself when rel is "") for
// messages: scheme://bucket/key.
func describeKey(scheme storageuri.Scheme, bucket, prefix, single, rel string) string {
	if rel == "" {
		p := prefix
		if p != "" {
			p += "/"
		}
		return string(scheme) + "://" + bucket + "/" + p
	}
	return string(scheme) + "://" + bucket + "/" + objectKey(prefix, single, rel)
}
