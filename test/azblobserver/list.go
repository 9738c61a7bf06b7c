package azblobserver

import (
	"encoding/base64"
	"encoding/xml"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The List Blobs response, element for element as the REST reference
// shows it.
type enumeration struct {
	XMLName         xml.Name `xml:"EnumerationResults"`
	ServiceEndpoint string   `xml:"ServiceEndpoint,attr"`
	ContainerName   string   `xml:"ContainerName,attr"`
	Prefix          *string  `xml:"Prefix"`
	Marker          *string  `xml:"Marker"`
	MaxResults      *int     `xml:"MaxResults"`
	Delimiter       *string  `xml:"Delimiter"`
	Blobs           struct {
		// Items are blobXML and prefixXML in name order, mixed as Azure
		// mixes them.
		Items []any
	} `xml:"Blobs"`
	NextMarker string `xml:"NextMarker"`
}

type blobXML struct {
	XMLName    xml.Name     `xml:"Blob"`
	Name       nameXML      `xml:"Name"`
	Properties properties   `xml:"Properties"`
	Metadata   *metadataXML `xml:"Metadata"`
	OrMetadata struct{}     `xml:"OrMetadata"`
}

// metadataXML is a blob's metadata, an element per name, listed when the
// request includes it.
type metadataXML struct {
	Items []metadataItem
}

type metadataItem struct {
	XMLName xml.Name
	Value   string `xml:",chardata"`
}

type prefixXML struct {
	XMLName xml.Name `xml:"BlobPrefix"`
	Name    nameXML  `xml:"Name"`
}

// nameXML is a name, percent-encoded and so marked when it holds
// characters that XML 1.0 cannot carry.
type nameXML struct {
	Encoded bool   `xml:"Encoded,attr,omitempty"`
	Name    string `xml:",chardata"`
}

type properties struct {
	CreationTime       string `xml:"Creation-Time"`
	LastModified       string `xml:"Last-Modified"`
	Etag               string `xml:"Etag"`
	ContentLength      int    `xml:"Content-Length"`
	ContentType        string `xml:"Content-Type"`
	ContentEncoding    string `xml:"Content-Encoding"`
	ContentLanguage    string `xml:"Content-Language"`
	ContentMD5         string `xml:"Content-MD5"`
	CacheControl       string `xml:"Cache-Control"`
	ContentDisposition string `xml:"Content-Disposition"`
	BlobType           string `xml:"BlobType"`
	AccessTier         string `xml:"AccessTier"`
	AccessTierInferred bool   `xml:"AccessTierInferred"`
	LeaseStatus        string `xml:"LeaseStatus"`
	LeaseState         string `xml:"LeaseState"`
	ServerEncrypted    bool   `xml:"ServerEncrypted"`
}

func xmlName(name string) nameXML {
	for _, r := range name {
		if r == utf8.RuneError || !xmlChar(r) {
			return nameXML{Encoded: true, Name: url.QueryEscape(name)}
		}
	}
	return nameXML{Name: name}
}

// xmlChar is XML 1.0's Char production.
func xmlChar(r rune) bool {
	return r == '\t' || r == '\n' || r == '\r' || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000
}

// list answers List Blobs: names in byte order, those under a delimiter
// rolled up into a BlobPrefix, and a NextMarker when a page is full. The
// marker is opaque as Azure's is, so that no caller mistakes it for a name.
func (s *Server) list(containerName string, q url.Values) *reply {
	page := 5000
	if v := q.Get("maxresults"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fail(http.StatusBadRequest, "OutOfRangeQueryParameterValue",
				"One of the query parameters specified in the request URI is outside the permissible range.",
				"QueryParameterName", "maxresults", "QueryParameterValue", v, "MinimumAllowed", "1", "MaximumAllowed", "5000")
		}
		page = min(page, n)
	}
	if s.pageSize > 0 {
		page = min(page, s.pageSize)
	}
	from, err := base64.RawURLEncoding.DecodeString(q.Get("marker"))
	if err != nil {
		return failQuery("marker")
	}
	prefix, delim := q.Get("prefix"), q.Get("delimiter")
	withMetadata := slices.Contains(strings.Split(q.Get("include"), ","), "metadata")
	out := enumeration{ServiceEndpoint: s.URL + "/", ContainerName: containerName}
	for name, p := range map[string]**string{"prefix": &out.Prefix, "marker": &out.Marker, "delimiter": &out.Delimiter} {
		if q.Has(name) {
			v := q.Get(name)
			*p = &v
		}
	}
	if q.Has("maxresults") {
		out.MaxResults = &page
	}

	blobs := s.containers[containerName].blobs
	names := make([]string, 0, len(blobs))
	for name := range blobs {
		if strings.HasPrefix(name, prefix) && name >= string(from) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for i := 0; i < len(names); {
		if len(out.Blobs.Items) == page {
			out.NextMarker = base64.RawURLEncoding.EncodeToString([]byte(names[i]))
			break
		}
		name := names[i]
		if j := strings.Index(name[len(prefix):], delim); delim != "" && j >= 0 {
			p := name[:len(prefix)+j+len(delim)]
			out.Blobs.Items = append(out.Blobs.Items, prefixXML{Name: xmlName(p)})
			for i < len(names) && strings.HasPrefix(names[i], p) {
				i++
			}
			continue
		}
		b := blobs[name]
		tier, inferred := b.tierOf()
		var metadata *metadataXML
		if withMetadata {
			metadata = &metadataXML{}
			if b.directory {
				metadata.Items = append(metadata.Items, metadataItem{XMLName: xml.Name{Local: "hdi_isfolder"}, Value: "true"})
			}
		}
		out.Blobs.Items = append(out.Blobs.Items, blobXML{Name: xmlName(name), Metadata: metadata, Properties: properties{
			CreationTime:       b.created.Format(http.TimeFormat),
			LastModified:       b.modified.Format(http.TimeFormat),
			Etag:               b.etag,
			ContentLength:      len(b.body),
			ContentType:        "application/octet-stream",
			ContentMD5:         base64.StdEncoding.EncodeToString(b.md5),
			BlobType:           "BlockBlob",
			AccessTier:         tier,
			AccessTierInferred: inferred,
			LeaseStatus:        "unlocked",
			LeaseState:         "available",
			ServerEncrypted:    true,
		}})
		i++
	}
	body, err := xml.Marshal(out)
	if err != nil {
		return fail(http.StatusInternalServerError, "InternalError", "The server encountered an internal error: "+err.Error())
	}
	h := http.Header{}
	h.Set("Content-Type", "application/xml")
	return &reply{status: http.StatusOK, header: h, body: append([]byte(`<?xml version="1.0" encoding="utf-8"?>`), body...)}
}
