package fetch

import (
	"context"
	"io"
	"strings"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// Object is a file of a source.
type Object struct {
	// Key is the file's slash-separated path below the model's root.
	Key string
	// Size in bytes, -1 when the source does not tell before the download.
	Size int64
	// Version is what the source says identifies the file's content, as
	// listed: S3's ETag, GCS's generation; "" when it does not say. A
	// file listed with the path, size and version it had when a model
	// beside the destination was fetched is taken from there (reuse.go).
	Version string
}

// Listing is what a source holds.
type Listing struct {
	Objects []Object
	// Dirs are directories the source names explicitly (an object store's
	// "dir/" markers, a local directory's empty directories).
	Dirs []string
	// Single is true when the URI names one file (a model archive, say)
	// rather than a directory: Objects holds it alone, under its base name.
	Single bool
	// SingleVersion is what the store names that file by now (S3's or
	// Azure's ETag, GCS's generation), "" if it does not say. Unlike an
	// Object's Version, the download need not be of it: a file replaced
	// since is downloaded as it then is, and its copy records the version
	// it came as (downloader.servedVersion).
	SingleVersion string
}

// Source lists and opens the files of a model.
type Source interface {
	// List returns every file below the model's root.
	List(ctx context.Context) (Listing, error)
	// Open starts the download of a listed file: what info says of the
	// object served (its size when known, else -1). The body is read under
	// ctx.
	Open(ctx context.Context, key string) (body io.ReadCloser, info objectInfo, err error)
	// Describe names a file for messages, without credentials.
	Describe(key string) string
	Close() error
}

// rangeSource is a Source that also serves parts of a file, so that a large
// one can be downloaded as several ranges at once.
type rangeSource interface {
	Source
	// OpenRange starts the download of the length bytes of a listed file
	// from offset.
	OpenRange(ctx context.Context, key string, offset, length int64) (body io.ReadCloser, info objectInfo, err error)
}

// objectInfo describes the object a download, or a range of it, came
// from.
type objectInfo struct {
	// Size of the whole object, -1 when not told.
	Size int64
	// Version identifies its content (an ETag, a generation), "" when
	// not told: ranges of one download must all have the same, and it
	// must be the one listed (changedSinceListed).
	Version string
}

// changedSinceListed fails the download of an object served in another
// version than the one it was listed with. The file is recorded with the
// listed version (fileRecord.Source), which a later fetch of the same URI
// trusts to take the file from the volume: the bytes must be that
// version's, or a store changed back to the listed version would be served
// the other's. The version listed is not there to be had any more, so the
// fetch ends, to list again on its next attempt.
func changedSinceListed(obj Object, served, what string) error {
	if obj.Version == "" || served == "" || sameVersion(obj.Version, served) {
		return nil
	}
	e := transientf(servingv1alpha1.ReasonFetchFailed, "%s: the object changed since it was listed (listed as version %s, served as %s); the next attempt lists it again", what, obj.Version, served)
	e.Relist = true
	return e
}

// sameVersion compares two versions of one object as stores write them:
// an S3 ETag with or without its quotes.
func sameVersion(a, b string) bool {
	return strings.Trim(a, `"`) == strings.Trim(b, `"`)
}
