package fetch

import (
	"context"
	"log/slog"
)

// redactingHandler hides secret values in everything logged through it:
// messages, string and error attributes. The fetcher logs no credential
// on purpose; this catches one that an error from a library might carry.
type redactingHandler struct {
	inner  slog.Handler
	redact func(string) string
}

func (h redactingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h redactingHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.redact(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.inner.Handle(ctx, out)
}

func (h redactingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = h.attr(a)
	}
	return redactingHandler{inner: h.inner.WithAttrs(clean), redact: h.redact}
}

func (h redactingHandler) WithGroup(name string) slog.Handler {
	return redactingHandler{inner: h.inner.WithGroup(name), redact: h.redact}
}

func (h redactingHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.redact(v.String()))
	case slog.KindGroup:
		g := v.Group()
		clean := make([]any, len(g))
		for i, ga := range g {
			clean[i] = h.attr(ga)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, h.redact(err.Error()))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
