package fetch

import (
	"path"
	"strings"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
)

// bucketPrefix is an object store's bucket and the prefix a model URI
// names in it: what the S3 and GCS sources share, how they name keys and
// how they list them.
type bucketPrefix struct {
	root     string // scheme://bucket, as messages name it
	name     string // the bucket
	prefix   string // no leading or trailing slash; "" for the whole bucket
	single   string // the key of the one object, when the prefix names one
	maxFiles int
}

func newBucketPrefix(loc storageuri.Location, maxFiles int) bucketPrefix {
	root := string(loc.Scheme) + "://" + loc.Bucket
	if loc.Scheme == storageuri.SchemeAzure {
		// The container's URL, as the URI names it.
		root = loc.URL.Scheme + "://" + loc.URL.Host + "/" + loc.Bucket
	}
	return bucketPrefix{root: root, name: loc.Bucket, prefix: loc.Prefix, maxFiles: maxFiles}
}

// listPrefix is what the store is asked to list: the prefix as a
// directory, so that "m" does not list "m2/…".
func (b *bucketPrefix) listPrefix() string {
	if b.prefix == "" {
		return ""
	}
	return b.prefix + "/"
}

// key is the key of the listed file rel: the one object when the prefix
// names one.
func (b *bucketPrefix) key(rel string) string {
	if b.single != "" {
		return b.single
	}
	return b.listPrefix() + rel
}

// Describe names the file rel, or the prefix when rel is "", for
// messages: scheme://bucket/key, or the container's URL and the key.
func (b *bucketPrefix) Describe(rel string) string {
	if rel == "" {
		return b.root + "/" + b.listPrefix()
	}
	return b.root + "/" + b.key(rel)
}

// keyListing turns the keys a store lists below b's prefix into a
// Listing, by the rules every store's source follows: keys relative to
// the prefix, folder markers kept as directories, unsafe paths refused,
// and at most maxFiles files.
type keyListing struct {
	b *bucketPrefix
	l Listing
}

func (b *bucketPrefix) listing() *keyListing { return &keyListing{b: b} }

// add takes one listed key, its size and its version.
func (k *keyListing) add(key string, size int64, version string) error {
	rel := strings.TrimPrefix(key, k.b.listPrefix())
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
		return permanentf(servingv1alpha1.ReasonInvalidLayout, "%s: the object key %q has empty, . or .. path segments", k.b.Describe(""), key)
	}
	k.l.Objects = append(k.l.Objects, Object{Key: rel, Size: size, Version: version})
	if len(k.l.Objects) > k.b.maxFiles {
		return permanentf(servingv1alpha1.ReasonTooLarge, "%s holds more than %d files", k.b.Describe(""), k.b.maxFiles)
	}
	return nil
}

// done is the listing once every key is added. With no file below the
// prefix, the prefix may name one object (an archive): lookup tells
// whether it does, its size and its version, and the object's key is kept
// for the download.
func (k *keyListing) done(lookup func() (size int64, version string, found bool, err error)) (Listing, error) {
	if len(k.l.Objects) > 0 {
		return k.l, nil
	}
	if k.b.prefix != "" {
		size, version, found, err := lookup()
		if err != nil {
			return Listing{}, err
		}
		if found {
			k.b.single = k.b.prefix
			return Listing{Single: true, Objects: []Object{{Key: path.Base(k.b.prefix), Size: size}}, SingleVersion: version}, nil
		}
	}
	return Listing{}, permanentf(servingv1alpha1.ReasonNotFound, "no objects under %s (check spec.model.storageUri)", k.b.Describe(""))
}
