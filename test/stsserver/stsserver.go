// Package stsserver is a stand-in for AWS STS's AssumeRoleWithWebIdentity,
// the one call a fetch makes to assume spec.model.webIdentity's role: it
// answers in STS's query protocol, with STS's error codes, and leaves to
// its user what a real STS decides (whether the token and role are
// accepted, and which credentials they get).
package stsserver

import (
	"encoding/xml"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Request is an AssumeRoleWithWebIdentity call as the server received it.
type Request struct {
	RoleARN, SessionName, Token string
}

// Credentials are what a role's assumption gives.
type Credentials struct {
	AccessKeyID, SecretAccessKey, SessionToken string
	Expiration                                 time.Time
}

// Refusal is an STS error: its code (AccessDenied, InvalidIdentityToken,
// IDPCommunicationError, ...) and message.
type Refusal struct {
	Status        int
	Code, Message string
}

func (r *Refusal) Error() string { return r.Code + ": " + r.Message }

// Server answers AssumeRoleWithWebIdentity with what its assume function
// decides.
type Server struct {
	mu sync.Mutex
	// assume accepts a request, with the credentials it gets, or refuses
	// it with a *Refusal.
	assume   func(Request) (Credentials, error)
	requests []Request
	srv      *http.Server
	// URL is the endpoint, for AWS_ENDPOINT_URL_STS.
	URL string
}

// Start serves on addr (host:0 for a free port) until Close.
func Start(addr string, assume func(Request) (Credentials, error)) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{assume: assume, URL: "http://" + l.Addr().String()}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

// Close stops the server.
func (s *Server) Close() { _ = s.srv.Close() }

// Decide has assume decide the calls from now on.
func (s *Server) Decide(assume func(Request) (Credentials, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.assume = assume
}

// Requests are the calls received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost {
		refuse(w, &Refusal{http.StatusBadRequest, "InvalidAction", "want a POST of a form"})
		return
	}
	if a := r.PostForm.Get("Action"); a != "AssumeRoleWithWebIdentity" {
		refuse(w, &Refusal{http.StatusBadRequest, "InvalidAction", fmt.Sprintf("could not find operation %s", a)})
		return
	}
	if r.Header.Get("Authorization") != "" {
		// The call is authenticated by its token alone: a client that
		// signs it with keys has keys it should not be using.
		refuse(w, &Refusal{http.StatusBadRequest, "InvalidParameterValue", "AssumeRoleWithWebIdentity is not signed"})
		return
	}
	req := Request{RoleARN: r.PostForm.Get("RoleArn"), SessionName: r.PostForm.Get("RoleSessionName"), Token: r.PostForm.Get("WebIdentityToken")}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	assume := s.assume
	s.mu.Unlock()
	c, err := assume(req)
	if err != nil {
		rf, ok := err.(*Refusal)
		if !ok {
			rf = &Refusal{http.StatusInternalServerError, "InternalFailure", err.Error()}
		}
		refuse(w, rf)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	_ = xml.NewEncoder(w).Encode(response{
		Result: result{
			Credentials: credentials{c.AccessKeyID, c.SecretAccessKey, c.SessionToken, c.Expiration.UTC().Format(time.RFC3339)},
			Subject:     "token subject",
			User:        user{Arn: req.RoleARN + "/" + req.SessionName, ID: "AROA0000000000000000:" + req.SessionName},
		},
		RequestID: "1",
	})
}

type response struct {
	XMLName   xml.Name `xml:"https://sts.amazonaws.com/doc/2011-06-15/ AssumeRoleWithWebIdentityResponse"`
	Result    result   `xml:"AssumeRoleWithWebIdentityResult"`
	RequestID string   `xml:"ResponseMetadata>RequestId"`
}

type result struct {
	Credentials credentials `xml:"Credentials"`
	Subject     string      `xml:"SubjectFromWebIdentityToken"`
	User        user        `xml:"AssumedRoleUser"`
}

type credentials struct {
	AccessKeyID     string `xml:"AccessKeyId"`
	SecretAccessKey string `xml:"SecretAccessKey"`
	SessionToken    string `xml:"SessionToken"`
	Expiration      string `xml:"Expiration"`
}

type user struct {
	Arn string `xml:"Arn"`
	ID  string `xml:"AssumedRoleId"`
}

func refuse(w http.ResponseWriter, r *Refusal) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(r.Status)
	_ = xml.NewEncoder(w).Encode(struct {
		XMLName   xml.Name `xml:"https://sts.amazonaws.com/doc/2011-06-15/ ErrorResponse"`
		Type      string   `xml:"Error>Type"`
		Code      string   `xml:"Error>Code"`
		Message   string   `xml:"Error>Message"`
		RequestID string   `xml:"RequestId"`
	}{Type: "Sender", Code: r.Code, Message: r.Message, RequestID: "1"})
}
